// A whole SRU stack in inference, in one call from Python: for every layer the matmul
// U = x @ W (through the BLAS that torch itself uses, found at run time with dlsym; for a few
// rows, as in decoding, through the memory-bound loop below), then the fused recurrence of
// sru_recurrence.cpp. Why: at one decoding step (L = 1) the per-layer
// Python of the general inference path (an aten matmul call, allocations, a ctypes call per
// layer) costs more than reading the weights; here it is one ctypes call per stack.
// Semantics are sru/ops/cpu/inference.py's forward_stack for stacks without layer norm or
// projection (the Python side routes those there); bit for bit the same above kSmallRows rows,
// equal to float rounding (another summation order) at or below it.
#include <cstdint>

#include "sru_args.h"
#include "sru_gemm.h"

extern "C" int sru_forward_f32(const SruArgs* a);
extern "C" int sru_forward_f64(const SruArgs* a);

namespace {

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
    const T* c0 = a.c0 ? static_cast<const T*>(a.c0) + i * a.batch * width : nullptr;
    SruArgs r = layer_recurrence_args(l, U, in, c0, a.mask_pad, out,
                                      static_cast<T*>(a.c_last) + i * a.batch * width, a.length,
                                      a.batch, a.num_threads);
    if (recurrence(&r) != 0) return 1;
    in = out;
  }
  return 0;
}

}  // namespace

extern "C" {
int64_t sru_stack_args_size() { return sizeof(StackArgs); }  // lets Python check its mirrors
int64_t sru_stack_layer_size() { return sizeof(StackLayer); }
int64_t sru_srupp_step_args_size() { return sizeof(SruppStepArgs); }  // srupp_step.cpp's
int64_t sru_srupp_layer_size() { return sizeof(SruppLayer); }
int sru_stack_forward_f32(const StackArgs* a) { return run_stack<float>(*a, sru_forward_f32); }
int sru_stack_forward_f64(const StackArgs* a) { return run_stack<double>(*a, sru_forward_f64); }
}
