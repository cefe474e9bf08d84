// ops::attention_forward / attention_backward: argument checks and dispatch on dtype (kernels/ops.h).
#include "kernels/cpu/attention.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace linea::ops {

namespace {

// Checks the shape description, the layout and every named tensor; returns the dtype they share.
// `query_like` tensors are [N, Hq·Dh], `kv_like` [N, Hkv·Dh], and lse [N, Hq].
DType check_attention_args(const std::string& op, const AttentionShape& shape, const SeqLayout& seqs,
                           const std::vector<std::pair<const char*, const Tensor*>>& query_like,
                           const std::vector<std::pair<const char*, const Tensor*>>& kv_like, const Tensor& lse) {
  if (shape.q_heads <= 0 || shape.kv_heads <= 0 || shape.head_dim <= 0) {
    throw std::invalid_argument(op + ": q_heads, kv_heads and head_dim must be positive, got " +
                                std::to_string(shape.q_heads) + ", " + std::to_string(shape.kv_heads) + ", " +
                                std::to_string(shape.head_dim));
  }
  if (shape.q_heads % shape.kv_heads != 0) {
    throw std::invalid_argument(op + ": q_heads (" + std::to_string(shape.q_heads) +
                                ") must be a multiple of kv_heads (" + std::to_string(shape.kv_heads) + ")");
  }
  if (shape.window < 0) {
    throw std::invalid_argument(op + ": window must be ≥ 0 (0 = unlimited), got " + std::to_string(shape.window));
  }
  if (!std::isfinite(shape.scale)) throw std::invalid_argument(op + ": scale must be finite");

  const Tensor& q = *query_like.front().second;
  if (q.ndim() != 2) throw std::invalid_argument(op + ": q must be 2-D [N, Hq·Dh], got " + q.describe());
  const int64_t n = q.dim(0);
  try {
    seqs.validate(n);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(op + ": seqs: " + e.what());
  }

  const DType dtype = q.dtype();
  if (dtype != DType::f32 && dtype != DType::f64) {
    throw std::invalid_argument(op + ": q must be f32 or f64, got " + q.describe());
  }
  auto check = [&](const char* name, const Tensor& t, const Shape& expected) {
    check_shape(t, expected, op + ": " + name);
    if (t.dtype() != dtype) {
      throw std::invalid_argument(op + ": " + name + " must be " + std::string(dtype_name(dtype)) + " like q, got " +
                                  t.describe());
    }
    if (t.device() != Device::cpu) {
      throw std::runtime_error(op + ": " + name + " is on " + std::string(device_name(t.device())) +
                               ", but attention has only the CPU implementation");
    }
  };
  for (const auto& [name, t] : query_like) check(name, *t, {n, shape.q_heads * shape.head_dim});
  for (const auto& [name, t] : kv_like) check(name, *t, {n, shape.kv_heads * shape.head_dim});
  check("lse", lse, {n, shape.q_heads});
  return dtype;
}

}  // namespace

void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionShape& shape, const SeqLayout& seqs) {
  const DType dtype =
      check_attention_args("attention_forward", shape, seqs, {{"q", &q}, {"out", &out}}, {{"k", &k}, {"v", &v}}, lse);
  auto run = [&]<class T>() {
    cpu::attention_forward<T>(out.data<T>(), lse.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(), shape, seqs);
  };
  if (dtype == DType::f32) {
    run.template operator()<float>();
  } else {
    run.template operator()<double>();
  }
}

void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const Tensor& lse, const AttentionShape& shape,
                        const SeqLayout& seqs) {
  const DType dtype =
      check_attention_args("attention_backward", shape, seqs, {{"q", &q}, {"out", &out}, {"dout", &dout}, {"dq", &dq}},
                           {{"k", &k}, {"v", &v}, {"dk", &dk}, {"dv", &dv}}, lse);
  auto run = [&]<class T>() {
    cpu::attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), dout.data<T>(), q.data<T>(), k.data<T>(),
                               v.data<T>(), out.data<T>(), lse.data<T>(), shape, seqs);
  };
  if (dtype == DType::f32) {
    run.template operator()<float>();
  } else {
    run.template operator()<double>();
  }
}

}  // namespace linea::ops
