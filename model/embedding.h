// Embedding: x[n, :] = table[ids[n], :], table: [vocab, D] ~ N(0, init_std). With tied
// embeddings the LM head reads the same table (Model passes table() to the head).
// backward accumulates into the table's gradient rows of the ids seen in forward.
// Vocabulary-parallel under tensor parallelism: each TP rank holds rows tp.split(vocab) of the
// table; forward looks up the ids in its rows (zeros for the others) and sums x over the group, so
// x is whole on every rank; backward adds to the rows it holds (no communication).
#pragma once
#include <string>

#include "kernels/random.h"
#include "model/parameters.h"
#include "model/step_context.h"
#include "model/tensor_parallel.h"

namespace linea {

class Embedding {
 public:
  Embedding(ParameterSet& params, const std::string& name, int64_t vocab, int64_t dim, const TensorParallel& tp = {});

  void init(Rng& rng, double std);
  // ids: i32 [N], each in [0, vocab) (checked; the error names the first bad position).
  Tensor forward(StepContext& ctx, const Tensor& ids);
  void backward(const Tensor& dx);
  Parameter& table() { return *table_; }
  const Parameter& table() const { return *table_; }

 private:
  int64_t vocab_, dim_;
  TensorParallel tp_;
  Parameter* table_;
  Tensor ids_;
};

}  // namespace linea
