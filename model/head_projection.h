// The projections into and out of a layer of `heads` heads, each `per_head` channels wide, under
// tensor parallelism by head (model/tensor_parallel.h's HeadShard): into_heads is column-parallel
// (in → heads · per_head; this rank holds its heads' rows of W), out_of_heads row-parallel
// (heads · per_head → out; this rank holds its heads' columns, and its y is its term of a sum over the
// group). Both are bias-free matrices (ParamRole::matrix), as every mixer's q, k, v, gate and output
// projections are.
#pragma once
#include <string>

#include "model/linear.h"
#include "model/parameters.h"
#include "model/tensor_parallel.h"

namespace linea {

inline Linear into_heads(ParameterSet& params, const std::string& name, int64_t in, int64_t heads, int64_t per_head,
                         const HeadShard& shard) {
  return Linear(params, name, in, heads * per_head, false, ParamRole::matrix, LinearSplit::outputs,
                shard.channels(per_head));
}

inline Linear out_of_heads(ParameterSet& params, const std::string& name, int64_t heads, int64_t per_head, int64_t out,
                           const HeadShard& shard) {
  return Linear(params, name, heads * per_head, out, false, ParamRole::matrix, LinearSplit::inputs,
                shard.channels(per_head));
}

}  // namespace linea
