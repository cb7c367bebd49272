// One decoding step (L = 1) of a whole SRU++ stack in one call from Python (srupp_step.py says when it runs).
// Why: the reference step (sru/srupp_decode.py) is some forty small torch ops a layer (six routed linears,
// layer norms, the attention's reshapes, the cache append), which cost several times the step's products;
// here every layer is, in order (the reference's order, sru/srupp_attention.py):
//
//   xn = LN_in(x)                              the cell's pre-norm (layer_norm, normalize_after=False)
//   z  = xn w1^T;  zq = LN_z(z)                the attention's pre-norm / the projected linear's norm
//   with attention:
//     [k ; v] = zq w_kv^T, written as the cache's last row (keys, values)
//     a = softmax(zq k^T / sqrt(D)) v          per head over the cached rows: decode_attention.cpp's kernel
//     o = LN_a(alpha * a + z)                  the attention's post-norm (normalize_after=True)
//   without: o = zq
//   U = o w_u^T;  h, c = the SRU recurrence of sru_recurrence.cpp (skip input x, before LN_in)
//   h = LN_out(h)                              the cell's post-norm
//
// float32 only (the attention kernel's type). Products as sru_stack.cpp's (sru_gemm.h).
#include <cmath>
#include <cstdint>

#include "sru_args.h"
#include "sru_gemm.h"

extern "C" int sru_forward_f32(const SruArgs* a);

namespace {

using Attention = int (*)(const float*, const float*, const float*, const float*, float*, int64_t, int64_t,
                          int64_t, int64_t, int64_t, const int64_t*, const int64_t*, const int64_t*,
                          const int64_t*, float, int);

enum Norm { kInput = 0, kZ = 1, kAttention = 2, kOutput = 3 };  // SruppLayer's norm_w / norm_b / eps slots

// out = LN(in) over rows of n (out may be in); none (weight null): out = in
void layer_norm(const SruppLayer& l, int slot, const float* in, float* out, int64_t rows, int64_t n) {
  const float* weight = static_cast<const float*>(l.norm_w[slot]);
  const float* bias = static_cast<const float*>(l.norm_b[slot]);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * n;
    float* y = out + r * n;
    if (weight == nullptr) {
      if (y != x) std::copy(x, x + n, y);
      continue;
    }
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / n;
    for (int64_t i = 0; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
    const float m = float(mean), inverse = float(1.0 / std::sqrt(squares / n + l.eps[slot]));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) * inverse * weight[i] + bias[i];
  }
}

struct Products {
  Gemm<float> gemm;  // null: a few rows, small_matmul_nt
  int64_t rows, threads;
  void operator()(const float* in, const void* w, float* out, int64_t m, int64_t n) const {
    if (gemm == nullptr) small_matmul_nt<float>(in, static_cast<const float*>(w), out, rows, m, n, threads);
    else matmul_nt<float>(gemm, in, static_cast<const float*>(w), out, rows, m, n);
  }
};

// keys / values' last row <- kv; att = the attention of every (row, head) query zq over the cached rows
int attend(const SruppStepArgs& a, const SruppLayer& l, const float* zq, const float* kv, float* att) {
  const int64_t B = a.batch, P = l.proj, D = P / l.heads;
  float* keys = static_cast<float*>(l.keys);
  float* values = static_cast<float*>(l.values);
  const int64_t last = (l.positions - 1) * B * P;
  for (int64_t b = 0; b < B; ++b) {
    std::copy(kv + b * 2 * P, kv + b * 2 * P + P, keys + last + b * P);
    std::copy(kv + b * 2 * P + P, kv + (b + 1) * 2 * P, values + last + b * P);
  }
  // as (G = B, H, Q = 1, D): q and out rows of P; keys and values rows B * P apart
  const int64_t q_stride[4] = {P, D, D, 1}, kv_stride[4] = {P, D, B * P, 1};
  const int threads = B * l.heads > 1 ? int(a.num_threads) : 1;
  const Attention kernel = reinterpret_cast<Attention>(const_cast<void*>(a.attention));
  return kernel(zq, keys, values, nullptr, att, B, l.heads, 1, l.positions, D, q_stride, kv_stride, kv_stride,
                nullptr, float(1.0 / std::sqrt(double(D))), threads) ? 0 : 3;
}

int run_step(const SruppStepArgs& a) {
  const int64_t B = a.batch;
  const Products product{B <= kSmallRows ? nullptr : find_gemm<float>(), B, a.num_threads};
  if (B > kSmallRows && product.gemm == nullptr) return 2;
  int64_t widest_in = a.input_size, proj = 0, widest_u = 0, width = 0;
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const SruppLayer& l = a.layers[i];
    widest_in = std::max(widest_in, l.in_features);
    proj = std::max(proj, l.proj);
    width = l.dirs * l.hidden;
    widest_u = std::max(widest_u, width * l.k);
  }
  // the workspace, per row: xn, z, zq, [k ; v], the attention, o, U, two layer outputs
  float* xn = static_cast<float*>(a.workspace);
  float *z = xn + B * widest_in, *zq = z + B * proj, *kv = zq + B * proj, *att = kv + 2 * B * proj;
  float *o = att + B * proj, *U = o + B * proj, *between = U + B * widest_u, *first = between + B * width;
  const float* in = static_cast<const float*>(a.x);
  if (a.w_in != nullptr) {
    product(in, a.w_in, first, a.input_size, a.layers[0].in_features);
    in = first;
  }
  for (int64_t i = 0; i < a.num_layers; ++i) {
    const SruppLayer& l = a.layers[i];
    const int64_t P = l.proj, D = l.dirs * l.hidden;
    layer_norm(l, kInput, in, xn, B, l.in_features);
    product(xn, l.w1, z, l.in_features, P);
    layer_norm(l, kZ, z, zq, B, P);
    const float* u_input = zq;
    if (l.w_kv != nullptr) {
      product(zq, l.w_kv, kv, P, 2 * P);
      if (int status = attend(a, l, zq, kv, att)) return status;
      const float alpha = *static_cast<const float*>(l.alpha);
#pragma omp simd
      for (int64_t j = 0; j < B * P; ++j) o[j] = att[j] * alpha + z[j];
      layer_norm(l, kAttention, o, o, B, P);
      u_input = o;
    }
    product(u_input, l.w_u, U, P, D * l.k);
    // alternate between a.h and the scratch block so that the last layer writes a.h and none its own input
    float* out = (a.num_layers - 1 - i) % 2 == 0 ? static_cast<float*>(a.h) : between;
    SruArgs r = layer_recurrence_args(l, U, in, static_cast<const float*>(a.c0) + i * B * D, nullptr, out,
                                      static_cast<float*>(a.c_last) + i * B * D, 1, B, a.num_threads);
    if (sru_forward_f32(&r) != 0) return 1;
    layer_norm(l, kOutput, out, out, B, D);
    in = out;
  }
  return 0;
}

}  // namespace

extern "C" {  // its structs' sizes are exported beside the stack's (sru_stack.cpp)
// 0: done; 1: a layer layout the recurrence does not take; 2: no BLAS symbol (B > kSmallRows); 3: the
// attention kernel refused the head size
int sru_srupp_step_f32(const SruppStepArgs* a) { return run_step(*a); }
}
