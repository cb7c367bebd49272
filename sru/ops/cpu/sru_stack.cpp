// A whole SRU stack in inference, in one call from Python: for every layer the matmul
// U = x @ W (through the BLAS that torch itself uses, found at run time with dlsym; for a few
// rows, as in decoding, through the memory-bound loop below), then the fused recurrence of
// sru_recurrence.cpp. Why: at one decoding step (L = 1) the per-layer
// Python of the general inference path (an aten matmul call, allocations, a ctypes call per
// layer) costs more than reading the weights; here it is one ctypes call per stack.
// Semantics are sru/ops/cpu/inference.py's forward_stack for stacks without layer norm or
// projection (the Python side routes those there); bit for bit the same above kSmallRows rows,
// equal to float rounding (another summation order) at or below it.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>

#include "sru_args.h"

extern "C" int sru_forward_f32(const SruArgs* a);
extern "C" int sru_forward_f64(const SruArgs* a);

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
// out^T (n, rows) = w^T (n, m) @ in^T (m, rows), so no transposes are needed.
template <typename T>
void matmul(Gemm<T> gemm, const T* in, const T* w, T* out, int64_t rows, int64_t m, int64_t n) {
  const int64_t M = n, N = rows, K = m;
  const T one = 1, zero = 0;
  gemm("N", "N", &M, &N, &K, &one, w, &M, in, &K, &zero, out, &M);
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

template <typename T>
int run_stack(const StackArgs& a, int (*recurrence)(const SruArgs*)) {
  const int64_t rows = a.length * a.batch;
  const Gemm<T> gemm = rows <= kSmallRows ? nullptr : find_gemm<T>();
  if (rows > kSmallRows && gemm == nullptr) return 2;
  int64_t widest = 0, width = 0;
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const StackLayer& l = a.layers[i];
    const int64_t w = l.dirs * l.hidden * l.k;
    if (w > widest) widest = w;
    width = l.dirs * l.hidden;
  }
  T* U = static_cast<T*>(a.workspace);
  T* between = U + rows * widest;  // the output of the layers that do not write a.h
  const T* in = static_cast<const T*>(a.x);
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const StackLayer& l = a.layers[i];
    const int64_t D = l.dirs * l.hidden;
    // Layers alternate between a.h and the scratch row block so that the last writes a.h and
    // no layer writes the buffer it reads.
    T* out = (a.num_layers - 1 - i) % 2 == 0 ? static_cast<T*>(a.h) : between;
    const T* weight = static_cast<const T*>(l.weight);
    if (rows <= kSmallRows) {
      small_matmul<T>(in, weight, U, rows, l.in_features, D * l.k, a.num_threads);
    } else {
      matmul<T>(gemm, in, weight, U, rows, l.in_features, D * l.k);
    }
    SruArgs r{};
    r.U = U;
    r.x = l.skip_mode == 1 ? in : nullptr;
    r.weight_c = l.weight_c;
    r.bias = l.bias;
    r.c0 = a.c0 ? static_cast<const T*>(a.c0) + i * a.batch * width : nullptr;
    r.mask_pad = a.mask_pad;
    r.h = out;
    r.c_last = static_cast<T*>(a.c_last) + i * a.batch * width;
    r.length = a.length;
    r.batch = a.batch;
    r.hidden = l.hidden;
    r.dirs = l.dirs;
    r.k = l.k;
    r.skip_mode = l.skip_mode;
    r.use_tanh = l.use_tanh;
    r.num_threads = a.num_threads;
    r.scale_x = l.scale_x;
    if (recurrence(&r) != 0) return 1;
    in = out;
  }
  return 0;
}

}  // namespace

extern "C" {
int64_t sru_stack_args_size() { return sizeof(StackArgs); }  // lets Python check its mirrors
int64_t sru_stack_layer_size() { return sizeof(StackLayer); }
int sru_stack_forward_f32(const StackArgs* a) { return run_stack<float>(*a, sru_forward_f32); }
int sru_stack_forward_f64(const StackArgs* a) { return run_stack<double>(*a, sru_forward_f64); }
}
