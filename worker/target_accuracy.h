// target_accuracy: the share of the positions with a target (≥ 0) at which the model's argmax is
// the target, over every micro-batch of a val split (one full forward each, Model::logits at those
// rows). For MQAR's val split (data/mqar_batches.h) the targets are the values after the query
// keys, so this is MQAR accuracy as Zoology reports it. The first of equal maxima counts as the
// argmax. NaN when no position has a target. Tensor parallelism: not available (Model::logits).
#pragma once
#include "data/validation_batches.h"
#include "model/model.h"

namespace linea {

double target_accuracy(Model& model, data::ValidationBatches& val);

}  // namespace linea
