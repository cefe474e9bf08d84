// ops::attention_forward / attention_backward: argument checks (OpArguments) and dispatch on
// device and dtype (kernels/ops.h, model/mixers/attention/attention.h): the CPU reference in
// model/mixers/attention/cpu/attention.h; on CUDA, cuDNN's fused attention or the own flash kernels
// as model/mixers/attention/cuda/attention_routing.h decides. ops::attention_over_cache (decoding):
// cpu/attention_decode.h, cuda/attention_decode.h.
#include "model/mixers/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/op_arguments.h"
#include "model/mixers/attention/cpu/attention.h"
#include "model/mixers/attention/cpu/attention_decode.h"
#ifdef LINEA_WITH_CUDA
#include "model/mixers/attention/cuda/attention_decode.h"
#include "model/mixers/attention/cuda/attention_routing.h"
#endif

namespace linea::ops {

namespace {

// Checks the shape description and q; returns N. q is [N, Hq·Dh].
int64_t check_attention_shape(OpArguments& args, const AttentionShape& shape, const Tensor& q) {
  args.require(shape.q_heads > 0 && shape.kv_heads > 0 && shape.head_dim > 0, "shape",
               "q_heads, kv_heads and head_dim must be positive, got " + std::to_string(shape.q_heads) + ", " +
                   std::to_string(shape.kv_heads) + ", " + std::to_string(shape.head_dim));
  args.require(shape.q_heads % shape.kv_heads == 0, "shape",
               "q_heads (" + std::to_string(shape.q_heads) + ") must be a multiple of kv_heads (" +
                   std::to_string(shape.kv_heads) + ")");
  args.require(shape.window >= 0, "shape", "window must be ≥ 0 (0 = unlimited), got " + std::to_string(shape.window));
  args.require(std::isfinite(shape.scale), "shape", "scale must be finite");
  args.require(!q.defined() || q.ndim() == 2, "q", "must be 2-D [N, Hq·Dh], got " + q.describe());
  args.floating(q, "q", {kAnyDim, shape.q_heads * shape.head_dim});
  return q.dim(0);
}

// The checks forward and backward share: the shape and q as above, the layout of the N tokens, k and
// v [N, Hkv·Dh], out [N, Hq·Dh] and the statistics lse [N, Hq]; returns N.
int64_t check_attention_operands(OpArguments& args, const AttentionShape& shape, const SeqLayout& seqs, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse) {
  const int64_t n = check_attention_shape(args, shape, q);
  args.layout(seqs, n);
  const int64_t query_width = shape.q_heads * shape.head_dim, kv_width = shape.kv_heads * shape.head_dim;
  args.floating(k, "k", {n, kv_width})
      .floating(v, "v", {n, kv_width})
      .floating(out, "out", {n, query_width})
      .statistics(lse, "lse", {n, shape.q_heads});
  return n;
}

}  // namespace

void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionShape& shape, const SeqLayout& seqs) {
  OpArguments args("attention_forward");
  check_attention_operands(args, shape, seqs, q, k, v, out, lse);
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::route_attention_forward(out, lse, q, k, v, shape, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::attention_forward<T>(out.data<T>(), lse.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(), shape, seqs);
  });
}

void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const Tensor& lse, const AttentionShape& shape,
                        const SeqLayout& seqs) {
  OpArguments args("attention_backward");
  const int64_t n = check_attention_operands(args, shape, seqs, q, k, v, out, lse);
  const int64_t query_width = shape.q_heads * shape.head_dim, kv_width = shape.kv_heads * shape.head_dim;
  args.floating(dout, "dout", {n, query_width})
      .floating(dq, "dq", {n, query_width})
      .floating(dk, "dk", {n, kv_width})
      .floating(dv, "dv", {n, kv_width});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::route_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), dout.data<T>(), q.data<T>(), k.data<T>(),
                               v.data<T>(), out.data<T>(), lse.data<T>(), shape, seqs);
  });
}

void attention_over_cache(Tensor out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& queries, const AttentionShape& shape) {
  OpArguments args("attention_over_cache");
  args.require(queries.defined() && queries.dtype() == DType::i32 && queries.ndim() == 2 && queries.dim(1) == 2 &&
                   queries.device() == Device::cpu,
               "queries", "expected i32 [N, 2] (sequence, position) on the cpu, got " + queries.describe());
  const int64_t n = queries.dim(0), rows = check_attention_shape(args, shape, q);
  args.require(rows == n, "queries",
               "expected one row per row of q (" + std::to_string(rows) + "), got " + queries.describe());
  const int64_t kv_width = shape.kv_heads * shape.head_dim;
  args.require(k_cache.ndim() == 3, "k_cache", "must be 3-D [S, C, Hkv·Dh], got " + k_cache.describe());
  args.floating(k_cache, "k_cache", {kAnyDim, kAnyDim, kv_width})
      .floating(v_cache, "v_cache", k_cache.shape())
      .floating(out, "out", q.shape());
  const int64_t seqs = k_cache.dim(0), capacity = k_cache.dim(1);
  const int32_t* query = queries.data<int32_t>();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t s = query[2 * t], p = query[2 * t + 1];
    const int64_t keys = shape.window > 0 ? std::min<int64_t>(p + 1, shape.window) : p + 1;
    if (s < 0 || s >= seqs || p < 0) {  // the messages only on failure (a check per query)
      args.fail("queries", "query " + std::to_string(t) + " (sequence " + std::to_string(s) + ", position " +
                               std::to_string(p) + ") is not a position of one of the caches' " + std::to_string(seqs) +
                               " sequences");
    }
    if (keys > capacity) {
      args.fail("k_cache", "query " + std::to_string(t) + " sees " + std::to_string(keys) +
                               " keys, more than the cache's " + std::to_string(capacity) + " rows");
    }
  }
  if (n == 0) return;
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::attention_over_cache(out, q, k_cache, v_cache, queries, shape);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::attention_over_cache<T>(out.data<T>(), q.data<T>(), query, n, k_cache.data<T>(), v_cache.data<T>(), capacity,
                                 shape);
  });
}

}  // namespace linea::ops
