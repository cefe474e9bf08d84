// Decoding's attention over KV caches on CUDA: ops::attention_over_cache
// (model/mixers/attention/attention.h) after its argument checks, with the same arguments and math.
// q, out and the caches share one dtype, f32 or bf16; arithmetic is f32. head_dim ≤ 256. Split over
// the keys (flash-decoding): every block takes up to 256 keys of one query and kv head, the blocks
// of a query are combined by a second kernel; deterministic (no atomics). Default stream.
#pragma once
#include "model/mixers/attention/attention.h"

namespace linea::cuda {

void attention_over_cache(Tensor out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& queries, const ops::AttentionShape& shape);

}  // namespace linea::cuda
