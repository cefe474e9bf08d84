// RWKV-6's token shift and lerps (kernels/ops.h), f32 arithmetic. x, delta: [N, C]; b(t), e(t):
// the first token and one past the last token of t's sequence (kernels/cuda/token_bounds.h):
//   delta[t, c] = (t > b(t) ? x[t − 1, c] : 0) − x[t, c]
//   dx[t, c] = (t + 1 < e(t) ? ddelta[t + 1, c] : 0) − ddelta[t, c]          (overwritten)
// Lerp, mu: [N, C] or [C] (then mu[c] for every row):
//   out = x + delta ⊙ mu;   ddelta += dout ⊙ mu;   dmu = dout ⊙ delta ([N, C], overwritten) or
//   dmu[c] += Σ_n dout ⊙ delta ([C], deterministic column sums, formed before ddelta changes).
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/token_bounds.h"

namespace linea::cuda {

namespace {
// One thread per element (grid stride); `toward` = −1 reads the previous token (forward), +1 the next
// (backward); the neighbour counts only inside [b(t), e(t)).
template <class T>
__global__ void shift_kernel(T* out, const T* in, const int64_t* begin, const int64_t* end, int64_t tokens,
                             int64_t width, int toward) {
  const int64_t n = tokens * width;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / width, u = t + toward;
    const float neighbour = u >= begin[t] && u < end[t] ? to_float(in[i + toward * width]) : 0.0f;
    out[i] = from_float<T>(neighbour - to_float(in[i]));
  }
}

template <class T>
void shift(Tensor out, const Tensor& in, const SeqLayout& seqs, int toward) {
  const int64_t tokens = in.dim(0), width = in.dim(1);
  if (tokens == 0 || width == 0) return;
  const std::vector<void*> pieces = scratch_with_token_bounds(seqs, {});
  shift_kernel<T><<<grid_stride_blocks(tokens * width), kThreadsPerBlock>>>(
      data_of<T>(out), data_of<T>(in), static_cast<const int64_t*>(pieces[1]), static_cast<const int64_t*>(pieces[2]),
      tokens, width, toward);
  check_launch("token shift_kernel");
}

// mu of one row for every row ([C]): a per-column parameter.
template <class T>
struct SharedMu {
  const T* mu;
  int64_t width;
  __device__ float at(int64_t i) const { return to_float(mu[i % width]); }
};

template <class T>
struct LerpSharedForward {  // in: x, delta
  SharedMu<T> mu;
  __device__ void operator()(int64_t i, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] + in[1] * mu.at(i);
  }
};

struct LerpRowForward {  // in: x, delta, mu
  __device__ void operator()(int64_t, const float (&in)[3], float (&out)[1]) const { out[0] = in[0] + in[1] * in[2]; }
};

template <class T>
struct LerpSharedBackward {  // in: dout, ddelta; out: ddelta
  SharedMu<T> mu;
  __device__ void operator()(int64_t i, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[1] + in[0] * mu.at(i);
  }
};

struct LerpRowBackward {  // in: dout, delta, mu, ddelta; out: ddelta, dmu
  __device__ void operator()(int64_t, const float (&in)[4], float (&out)[2]) const {
    out[0] = in[3] + in[0] * in[2];
    out[1] = in[0] * in[1];
  }
};

// f(n, c) = dout ⊙ delta
template <class T>
struct MuTerm {
  const T *dout, *delta;
  int64_t width;
  __device__ float operator()(int64_t n, int64_t c) const {
    return to_float(dout[n * width + c]) * to_float(delta[n * width + c]);
  }
};
}  // namespace

void token_shift_forward(Tensor delta, const Tensor& x, const SeqLayout& seqs) {
  dispatch_float(x.dtype(), [&](auto zero) { shift<decltype(zero)>(delta, x, seqs, -1); });
}

void token_shift_backward(Tensor dx, const Tensor& ddelta, const SeqLayout& seqs) {
  dispatch_float(ddelta.dtype(), [&](auto zero) { shift<decltype(zero)>(dx, ddelta, seqs, +1); });
}

void lerp_forward(Tensor out, const Tensor& x, const Tensor& delta, const Tensor& mu) {
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (mu.ndim() == 2) {
      map_elements<T, 3, 1>(x.numel(), {data_of<T>(x), data_of<T>(delta), data_of<T>(mu)}, {data_of<T>(out)},
                            LerpRowForward{});
    } else {
      map_elements<T, 2, 1>(x.numel(), {data_of<T>(x), data_of<T>(delta)}, {data_of<T>(out)},
                            LerpSharedForward<T>{{data_of<T>(mu), x.dim(1)}});
    }
  });
}

void lerp_backward(Tensor ddelta, Tensor dmu, const Tensor& dout, const Tensor& delta, const Tensor& mu) {
  dispatch_float(delta.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t rows = delta.dim(0), width = delta.dim(1);
    if (mu.ndim() == 2) {
      map_elements<T, 4, 2>(delta.numel(), {data_of<T>(dout), data_of<T>(delta), data_of<T>(mu), data_of<T>(ddelta)},
                            {data_of<T>(ddelta), data_of<T>(dmu)}, LerpRowBackward{});
    } else {
      float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(rows, width)})[0]);
      add_column_sums(data_of<T>(dmu), partials, rows, width, MuTerm<T>{data_of<T>(dout), data_of<T>(delta), width});
      map_elements<T, 2, 1>(delta.numel(), {data_of<T>(dout), data_of<T>(ddelta)}, {data_of<T>(ddelta)},
                            LerpSharedBackward<T>{{data_of<T>(mu), width}});
    }
  });
}

}  // namespace linea::cuda
