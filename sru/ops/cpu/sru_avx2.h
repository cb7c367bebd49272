// U's layout in AVX2 for the fused CPU kernels (sru_recurrence.cpp): the float32 k = 3 forward
// and backward steps in AVX2 + FMA intrinsics, and the de-interleave of the generic loop's tail.
//
// Why: U stores each unit's (u0, u1, u2) side by side. The generic vector loop needs them as
// three unit-stride rows, so it first copies them apart into a buffer (deinterleave3) and then
// reads them back. The steps below do the same blends and permutes in registers and feed the gate
// math directly (the backward also interleaves grad U back in registers), and they work on two
// vectors at a time (see exp_n). The arithmetic is sru_math.h's (the same exp polynomial, clamps
// and tanh series), so results agree with the generic loop to float rounding (FMA contraction may
// differ). Measurements: docs/ops.md, "AVX2 steps".
#pragma once
#include <cstdint>

#ifdef __AVX2__
#include <immintrin.h>
#endif

namespace sru_avx2 {

#ifdef __AVX2__
// 8 units' (u0, u1, u2) triples at p (24 floats) -> three vectors, lane l = unit l: 3 loads,
// 6 blends, 3 lane permutes.
inline void split3(const float* p, __m256& u0, __m256& u1, __m256& u2) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8), c = _mm256_loadu_ps(p + 16);
  // After the blends, lane i of x / y / z holds some unit's u0 / u1 / u2; the permutes sort them.
  const __m256 x = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x92), c, 0x24);
  const __m256 y = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x24), c, 0x49);
  const __m256 z = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x49), c, 0x92);
  u0 = _mm256_permutevar8x32_ps(x, _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5));
  u1 = _mm256_permutevar8x32_ps(y, _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6));
  u2 = _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7));
}

// The inverse of split3: three vectors of 8 units -> their 24 interleaved floats at p. The
// permutes are undone first (two of the three are their own inverse), then the blends.
inline void join3(float* p, __m256 u0, __m256 u1, __m256 u2) {
  const __m256 x = _mm256_permutevar8x32_ps(u0, _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5));
  const __m256 y = _mm256_permutevar8x32_ps(u1, _mm256_setr_epi32(5, 0, 3, 6, 1, 4, 7, 2));
  const __m256 z = _mm256_permutevar8x32_ps(u2, _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7));
  _mm256_storeu_ps(p, _mm256_blend_ps(_mm256_blend_ps(x, y, 0x92), z, 0x24));
  _mm256_storeu_ps(p + 8, _mm256_blend_ps(_mm256_blend_ps(z, x, 0x92), y, 0x24));
  _mm256_storeu_ps(p + 16, _mm256_blend_ps(_mm256_blend_ps(y, z, 0x92), x, 0x24));
}
#endif

// U's (u0, u1, u2) triples of n units -> three contiguous rows. The forward loop then reads
// unit-stride vectors instead of stride-3 ones, which GCC builds from many permutes: the k = 3
// forward got faster on AVX2 (docs/ops.md, "AVX2 steps"). On AVX2 through split3;
// elsewhere a plain loop.
inline void deinterleave3(const float* u, float* u0, float* u1, float* u2, int64_t n) {
  int64_t j = 0;
#ifdef __AVX2__
  for (; j + 8 <= n; j += 8) {
    __m256 a, b, c;
    split3(u + 3 * j, a, b, c);
    _mm256_storeu_ps(u0 + j, a);
    _mm256_storeu_ps(u1 + j, b);
    _mm256_storeu_ps(u2 + j, c);
  }
#endif
  for (; j < n; ++j) {
    u0[j] = u[3 * j];
    u1[j] = u[3 * j + 1];
    u2[j] = u[3 * j + 2];
  }
}

#if defined(__AVX2__) && defined(__FMA__)
#define SRU_HAVE_AVX2_STEP 1

// Every function works on N independent vectors, statement by statement over the N (GCC unrolls
// these constant loops), so the instructions of N vectors interleave in program order. Why: one
// vector's chain (exp, then the division, then c and h) is ~80 cycles long, longer than the core's
// out-of-order window can overlap across loop iterations; with the work of several vectors side
// by side the core always has independent instructions to issue.

// sru_math::fast_exp on N vectors of eight lanes, in place.
template <int N>
inline void exp_n(__m256* x) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23: round to an integer
  __m256 nf[N], r[N], r2[N], q[N];
  __m256i n[N];
  for (int i = 0; i < N; ++i)
    x[i] = _mm256_min_ps(_mm256_max_ps(x[i], _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  for (int i = 0; i < N; ++i) {
    const __m256 shifted = _mm256_fmadd_ps(x[i], _mm256_set1_ps(1.44269504088896341f), magic);
    nf[i] = _mm256_sub_ps(shifted, magic);
    n[i] = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x4B400000));
  }
  for (int i = 0; i < N; ++i) r[i] = _mm256_fnmadd_ps(nf[i], _mm256_set1_ps(0.693145751953125f), x[i]);
  for (int i = 0; i < N; ++i) r[i] = _mm256_fnmadd_ps(nf[i], _mm256_set1_ps(1.42860682030941723e-6f), r[i]);
  for (int i = 0; i < N; ++i) r2[i] = _mm256_mul_ps(r[i], r[i]);
  for (int i = 0; i < N; ++i) {
    const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0.16666520681344027f), r[i], _mm256_set1_ps(0.49999993450978f));
    const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0.008368710680944448f), r[i], _mm256_set1_ps(0.04166838749705684f));
    const __m256 r4 = _mm256_mul_ps(r2[i], r2[i]);
    q[i] = _mm256_fmadd_ps(r4, _mm256_set1_ps(0.0013814607891620354f), _mm256_fmadd_ps(r2[i], hi, lo));
  }
  for (int i = 0; i < N; ++i) {
    const __m256 p = _mm256_fmadd_ps(r2[i], q[i], _mm256_add_ps(_mm256_set1_ps(1.0f), r[i]));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(n[i], _mm256_set1_epi32(127)), 23);
    x[i] = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }
}

template <int N>
inline void sigmoid_n(__m256* x) {  // 1 / (1 + exp(-x)), in place
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int i = 0; i < N; ++i) x[i] = _mm256_sub_ps(_mm256_setzero_ps(), x[i]);
  exp_n<N>(x);
  for (int i = 0; i < N; ++i) x[i] = _mm256_div_ps(one, _mm256_add_ps(one, x[i]));
}

// sru_math::tanh_t: sign(x) (1 - e) / (1 + e) with e = exp(-2|x|), a series below |x| = 0.04.
template <int N>
inline void tanh_n(const __m256* x, __m256* y) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), cut = _mm256_set1_ps(0.04f);
  __m256 ax[N], e[N];
  for (int i = 0; i < N; ++i) ax[i] = _mm256_andnot_ps(sign, x[i]);
  for (int i = 0; i < N; ++i) e[i] = _mm256_mul_ps(_mm256_set1_ps(-2.0f), ax[i]);
  exp_n<N>(e);
  for (int i = 0; i < N; ++i) {
    const __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e[i]), _mm256_add_ps(one, e[i]));
    const __m256 x2 = _mm256_mul_ps(ax[i], ax[i]);
    __m256 s = _mm256_fmadd_ps(x2, _mm256_set1_ps(-17.0f / 315.0f), _mm256_set1_ps(2.0f / 15.0f));
    s = _mm256_fmadd_ps(x2, s, _mm256_set1_ps(-1.0f / 3.0f));
    const __m256 small = _mm256_mul_ps(ax[i], _mm256_fmadd_ps(x2, s, one));
    const __m256 v = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax[i], cut, _CMP_LT_OQ));
    y[i] = _mm256_or_ps(v, _mm256_and_ps(sign, x[i]));
  }
}

// The forget- and reset-gate inputs of units [j, j + 8N), before the sigmoid: gate[i] =
// u1 + v_f c_prev + b_f, gate[N + i] = u2 + v_r c_prev + b_r; also u0 and c_prev.
template <int N>
inline void gate_inputs(int64_t j, const float* u, const float* c_prev, const float* vf, const float* vr,
                        const float* bf, const float* br, __m256* u0, __m256* cp, __m256* gate) {
  for (int i = 0; i < N; ++i) {
    const int64_t at = j + 8 * i;
    __m256 u1, u2;
    split3(u + 3 * at, u0[i], u1, u2);
    cp[i] = _mm256_loadu_ps(c_prev + at);
    gate[i] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_loadu_ps(vf + at), cp[i], u1), _mm256_loadu_ps(bf + at));
    gate[N + i] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_loadu_ps(vr + at), cp[i], u2), _mm256_loadu_ps(br + at));
  }
}

// Units [j, j + 8N) of one row of one step (the arguments of forward_step_k3).
template <int N, int SKIP, bool TANH, bool MASK>
inline void forward_block_k3(int64_t j, const float* u, const float* c_prev, const float* vf,
                             const float* vr, const float* bf, const float* br, const float* mask,
                             const float* xt, float scale_x, float* c_next, float* ht) {
  __m256 u0[N], cp[N], gate[2 * N], cn[N], g[N];  // gate: N forget-gate, then N reset-gate inputs
  gate_inputs<N>(j, u, c_prev, vf, vr, bf, br, u0, cp, gate);
  sigmoid_n<2 * N>(gate);
  for (int i = 0; i < N; ++i) {
    cn[i] = _mm256_fmadd_ps(gate[i], _mm256_sub_ps(cp[i], u0[i]), u0[i]);  // u0 + f (c_prev - u0)
    _mm256_storeu_ps(c_next + j + 8 * i, cn[i]);
  }
  if constexpr (TANH) tanh_n<N>(cn, g); else for (int i = 0; i < N; ++i) g[i] = cn[i];
  for (int i = 0; i < N; ++i) {
    const int64_t at = j + 8 * i;
    const __m256 rm = MASK ? _mm256_mul_ps(gate[N + i], _mm256_loadu_ps(mask + at)) : gate[N + i];
    if constexpr (SKIP == 0) {
      _mm256_storeu_ps(ht + at, _mm256_mul_ps(rm, g[i]));
    } else {
      const __m256 xs = _mm256_mul_ps(_mm256_loadu_ps(xt + at), _mm256_set1_ps(scale_x));
      _mm256_storeu_ps(ht + at, _mm256_fmadd_ps(rm, _mm256_sub_ps(g[i], xs), xs));  // x' + r (g - x')
    }
  }
}

// One row of one step: units [0, n8) with n8 = n rounded down to a multiple of 8, which it
// returns (the caller's generic loop does the rest). Same meaning as the generic loop: u holds
// n (u0, u1, u2) triples; c_next may be c_prev (in place), each vector is read before written.
template <int SKIP, bool TANH, bool MASK>
inline int64_t forward_step_k3(const float* u, const float* c_prev, const float* vf, const float* vr,
                               const float* bf, const float* br, const float* mask, const float* xt,
                               float scale_x, float* c_next, float* ht, int64_t n) {
  constexpr int kWide = 2;  // vectors side by side
  int64_t j = 0;
  for (; j + 8 * kWide <= n; j += 8 * kWide)
    forward_block_k3<kWide, SKIP, TANH, MASK>(j, u, c_prev, vf, vr, bf, br, mask, xt, scale_x, c_next, ht);
  for (; j + 8 <= n; j += 8)
    forward_block_k3<1, SKIP, TANH, MASK>(j, u, c_prev, vf, vr, bf, br, mask, xt, scale_x, c_next, ht);
  return j;
}

// One row of one backward step (float32, k = 3, gate weights shared over time): the pointers the
// generic loop of backward_kernel uses, each at the row's first unit.
struct BackwardRow {
  const float *u, *c_prev, *c, *grad_h, *x, *mask, *vf, *vr, *bf, *br;
  float *grad_c, *sum_mask, *sum_bf, *sum_br, *sum_vf, *sum_vr, *grad_u, *grad_x;
  float scale_x;
};

// Units [j, j + 8N) of the backward: the generic loop's equations (docs/spec.md#backward), with
// grad U's (gu0, gu1, gu2) triples interleaved in registers (the inverse of the loads' shuffle).
template <int N, int SKIP, bool TANH, bool MASK>
inline void backward_block_k3(int64_t j, const BackwardRow& w) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 u0[N], cp[N], gate[2 * N], g[N];
  gate_inputs<N>(j, w.u, w.c_prev, w.vf, w.vr, w.bf, w.br, u0, cp, gate);
  for (int i = 0; i < N; ++i) g[i] = _mm256_loadu_ps(w.c + j + 8 * i);
  sigmoid_n<2 * N>(gate);  // f, then r
  if constexpr (TANH) tanh_n<N>(g, g);
  for (int i = 0; i < N; ++i) {
    const int64_t at = j + 8 * i;
    const __m256 f = gate[i], r = gate[N + i];
    const __m256 dg = TANH ? _mm256_fnmadd_ps(g[i], g[i], one) : one;  // 1 - g^2
    const __m256 xs = SKIP == 0 ? _mm256_setzero_ps()
                                : _mm256_mul_ps(_mm256_loadu_ps(w.x + at), _mm256_set1_ps(w.scale_x));
    const __m256 gh = _mm256_loadu_ps(w.grad_h + at);
    const __m256 ghm = MASK ? _mm256_mul_ps(gh, _mm256_loadu_ps(w.mask + at)) : gh;
    const __m256 g_xs = _mm256_sub_ps(g[i], xs);
    if constexpr (MASK)  // h = x' + m r (g - x')
      _mm256_storeu_ps(w.sum_mask + at, _mm256_fmadd_ps(_mm256_mul_ps(gh, r), g_xs, _mm256_loadu_ps(w.sum_mask + at)));
    const __m256 gu2 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(ghm, g_xs), r), _mm256_sub_ps(one, r));
    const __m256 gct = _mm256_fmadd_ps(_mm256_mul_ps(ghm, r), dg, _mm256_loadu_ps(w.grad_c + at));
    const __m256 gu1 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(gct, _mm256_sub_ps(cp[i], u0[i])), f),
                                     _mm256_sub_ps(one, f));
    const __m256 gu0 = _mm256_mul_ps(gct, _mm256_sub_ps(one, f));
    join3(w.grad_u + 3 * at, gu0, gu1, gu2);  // back into U's layout
    if constexpr (SKIP == 1)  // grad x = (gh - m gh r) scale_x
      _mm256_storeu_ps(w.grad_x + at, _mm256_mul_ps(_mm256_fnmadd_ps(ghm, r, gh), _mm256_set1_ps(w.scale_x)));
    const __m256 vfj = _mm256_loadu_ps(w.vf + at), vrj = _mm256_loadu_ps(w.vr + at);
    _mm256_storeu_ps(w.grad_c + at, _mm256_fmadd_ps(gu2, vrj, _mm256_fmadd_ps(gu1, vfj, _mm256_mul_ps(gct, f))));
    _mm256_storeu_ps(w.sum_bf + at, _mm256_add_ps(_mm256_loadu_ps(w.sum_bf + at), gu1));
    _mm256_storeu_ps(w.sum_br + at, _mm256_add_ps(_mm256_loadu_ps(w.sum_br + at), gu2));
    _mm256_storeu_ps(w.sum_vf + at, _mm256_fmadd_ps(gu1, cp[i], _mm256_loadu_ps(w.sum_vf + at)));
    _mm256_storeu_ps(w.sum_vr + at, _mm256_fmadd_ps(gu2, cp[i], _mm256_loadu_ps(w.sum_vr + at)));
  }
}

// The backward of one row of one step: units [0, n8) as forward_step_k3 (returns n8).
template <int SKIP, bool TANH, bool MASK>
inline int64_t backward_step_k3(const BackwardRow& w, int64_t n) {
  constexpr int kWide = 2;
  int64_t j = 0;
  for (; j + 8 * kWide <= n; j += 8 * kWide) backward_block_k3<kWide, SKIP, TANH, MASK>(j, w);
  for (; j + 8 <= n; j += 8) backward_block_k3<1, SKIP, TANH, MASK>(j, w);
  return j;
}

#endif  // __AVX2__ && __FMA__

}  // namespace sru_avx2
