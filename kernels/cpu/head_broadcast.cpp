#include "kernels/cpu/head_broadcast.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

template <class T>
void repeat_heads(T* out, const T* x, int64_t rows, int64_t heads, int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) std::copy_n(x + n * width, width, out + (n * heads + h) * width);
  }
}

template <class T>
void sum_heads(T* dx, const T* dout, int64_t rows, int64_t heads, int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t p = 0; p < width; ++p) {
      T sum = 0;
      for (int64_t h = 0; h < heads; ++h) sum += dout[(n * heads + h) * width + p];
      dx[n * width + p] = sum;
    }
  }
}

template <class T>
void scale_heads_forward(T* out, const T* x, const T* s, int64_t rows, int64_t heads, int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t first = (n * heads + h) * width;
      for (int64_t p = 0; p < width; ++p) out[first + p] = x[first + p] * s[n * heads + h];
    }
  }
}

template <class T>
void scale_heads_backward(T* dx, T* ds, const T* dout, const T* x, const T* s, int64_t rows, int64_t heads,
                          int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t first = (n * heads + h) * width;
      T sum = 0;
      for (int64_t p = 0; p < width; ++p) {
        sum += dout[first + p] * x[first + p];
        dx[first + p] = dout[first + p] * s[n * heads + h];
      }
      ds[n * heads + h] = sum;
    }
  }
}

template <class T>
void add_scaled_heads_forward(T* y, const T* x, const T* D, int64_t rows, int64_t heads, int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t first = (n * heads + h) * width;
      for (int64_t p = 0; p < width; ++p) y[first + p] += D[h] * x[first + p];
    }
  }
}

template <class T>
void add_scaled_heads_backward(T* dx, T* dD, const T* dy, const T* x, const T* D, int64_t rows, int64_t heads,
                               int64_t width) {
  accumulate_over_row_blocks(rows, heads, dD, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t first = (n * heads + h) * width;
        for (int64_t p = 0; p < width; ++p) partial[h] += dy[first + p] * x[first + p];
      }
    }
  });
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t first = (n * heads + h) * width;
      for (int64_t p = 0; p < width; ++p) dx[first + p] += D[h] * dy[first + p];
    }
  }
}

#define LINEA_HEAD_BROADCAST(T)                                                                           \
  template void repeat_heads<T>(T*, const T*, int64_t, int64_t, int64_t);                                 \
  template void sum_heads<T>(T*, const T*, int64_t, int64_t, int64_t);                                    \
  template void scale_heads_forward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t);                \
  template void scale_heads_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t); \
  template void add_scaled_heads_forward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t);           \
  template void add_scaled_heads_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);
LINEA_HEAD_BROADCAST(float)
LINEA_HEAD_BROADCAST(double)
#undef LINEA_HEAD_BROADCAST

}  // namespace linea::cpu
