// The products of the inference kernels that run a whole stack in one call (sru_stack.cpp: the SRU,
// weights (in, out); srupp_step.cpp: SRU++'s decoding step, nn.Linear weights (out, in)): through the BLAS
// torch itself uses above kSmallRows rows, through the memory-bound loops below at or under it.
#pragma once
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>

namespace {

// The Fortran BLAS interface (column-major; integers by pointer), which torch's CPU wheels export
// from their MKL (sgemm_/dgemm_); looked up at run time so that a torch without it only disables
// this path (status 2) instead of failing to load the library. The integers are passed as int64
// holding 32-bit values: on a little-endian machine that reads right whether the BLAS takes
// 32-bit (LP64) or 64-bit (ILP64) integers, and a one-time 2 x 3 x 2 product checks the result.
template <typename T>
using Gemm = void (*)(const char*, const char*, const void*, const void*, const void*, const T*,
                      const T*, const void*, const T*, const void*, const T*, T*, const void*);

// out (rows, n) = in (rows, m) @ w (m, n), all row-major: in column-major terms
// out^T (n, rows) = w^T (n, m) @ in^T (m, rows), so no transposes are needed. With ``w_is_linear``
// w is an nn.Linear weight (n, m) and out = in @ w^T: the BLAS reads w as its column-major transpose.
template <typename T>
void matmul(Gemm<T> gemm, const T* in, const T* w, T* out, int64_t rows, int64_t m, int64_t n,
            bool w_is_linear = false) {
  const int64_t M = n, N = rows, K = m;
  const T one = 1, zero = 0;
  gemm(w_is_linear ? "T" : "N", "N", &M, &N, &K, &one, w, w_is_linear ? &K : &M, in, &K, &zero, out, &M);
}

template <typename T>
bool gemm_works(Gemm<T> gemm) {
  const T in[6] = {1, 2, 3, 4, 5, 6};       // (2, 3)
  const T w[6] = {1, 0, 0, 1, 1, 1};        // (3, 2)
  T out[4] = {0, 0, 0, 0};
  matmul<T>(gemm, in, w, out, 2, 3, 2);
  return out[0] == 4 && out[1] == 5 && out[2] == 10 && out[3] == 11;
}

template <typename T>
Gemm<T> find_gemm() {
  static const Gemm<T> gemm = [] {
    const char* name = sizeof(T) == 4 ? "sgemm_" : "dgemm_";
    void* found = dlsym(RTLD_DEFAULT, name);
    if (found == nullptr) {
      // Python loads torch's libraries with RTLD_LOCAL, so ask the loaded libtorch_cpu itself
      // (RTLD_NOLOAD: never load a second copy).
      void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
      if (torch_cpu != nullptr) found = dlsym(torch_cpu, name);
    }
    const Gemm<T> candidate = reinterpret_cast<Gemm<T>>(found);
    return candidate != nullptr && gemm_works<T>(candidate) ? candidate : nullptr;
  }();
  return gemm;
}

// out (rows, n) = in (rows, m) @ w (m, n) for a few rows (decoding: rows = batch), where the
// product reads the weight once and is bound by memory: 4 weight rows at a time are streamed
// through an output block that stays in L1. On the AMD EPYC we measured, the BLAS in torch's
// wheel (MKL) took 1.1-1.6x this loop's time for rows = 1-8 (docs/design_notes.md#one-step-decoding).
// Threads split the columns.
template <typename T>
void small_matmul(const T* in, const T* w, T* out, int64_t rows, int64_t m, int64_t n,
                  int64_t threads) {
  const int64_t chunk = threads > 1 ? ((n + threads - 1) / threads + 15) / 16 * 16 : n;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && m * n >= (1 << 18))
  for (int64_t j0 = 0; j0 < n; j0 += chunk) {
    const int64_t nj = std::min(chunk, n - j0);
    for (int64_t b = 0; b < rows; ++b) std::fill(out + b * n + j0, out + b * n + j0 + nj, T(0));
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      const T *w0 = w + i * n + j0, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n;
      for (int64_t b = 0; b < rows; ++b) {
        const T *a = in + b * m + i;
        const T a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        T* o = out + b * n + j0;
#pragma omp simd
        for (int64_t j = 0; j < nj; ++j) o[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j];
      }
    }
    for (; i < m; ++i) {
      const T* wi = w + i * n + j0;
      for (int64_t b = 0; b < rows; ++b) {
        const T a = in[b * m + i];
        T* o = out + b * n + j0;
#pragma omp simd
        for (int64_t j = 0; j < nj; ++j) o[j] += a * wi[j];
      }
    }
  }
}

constexpr int64_t kSmallRows = 8;  // up to here small_matmul beat the BLAS (docs/benchmarks.md)

// out (rows, n) = in (rows, m) @ w^T for w (n, m) row-major (an nn.Linear weight).
template <typename T>
void matmul_nt(Gemm<T> gemm, const T* in, const T* w, T* out, int64_t rows, int64_t m, int64_t n) {
  matmul<T>(gemm, in, w, out, rows, m, n, true);
}

// small_matmul for an nn.Linear weight w (n, m): every output a dot product of an input row with a weight
// row, four weight rows at a time (each read once per input row, from L1 after the first). Threads split
// the weight rows.
template <typename T>
void small_matmul_nt(const T* in, const T* w, T* out, int64_t rows, int64_t m, int64_t n, int64_t threads) {
  const int64_t whole = n - n % 4;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && m * n >= (1 << 18))
  for (int64_t j = 0; j < whole; j += 4) {
    const T *w0 = w + j * m, *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m;
    for (int64_t b = 0; b < rows; ++b) {
      const T* a = in + b * m;
      T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int64_t i = 0; i < m; ++i) {
        s0 += a[i] * w0[i];
        s1 += a[i] * w1[i];
        s2 += a[i] * w2[i];
        s3 += a[i] * w3[i];
      }
      T* o = out + b * n + j;
      o[0] = s0, o[1] = s1, o[2] = s2, o[3] = s3;
    }
  }
  for (int64_t j = whole; j < n; ++j)
    for (int64_t b = 0; b < rows; ++b) {
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < m; ++i) s += in[b * m + i] * w[j * m + i];
      out[b * n + j] = s;
    }
}

}  // namespace
