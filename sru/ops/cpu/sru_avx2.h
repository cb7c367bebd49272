// The float32 k = 3 forward step of sru_recurrence.cpp written with AVX2 + FMA intrinsics.
//
// Why: U stores each unit's (u0, u1, u2) side by side. The generic vector loop needs them as
// three unit-stride rows, so it first copies them apart into a buffer (deinterleave3) and then
// reads them back. Here the same blends and permutes happen in registers and feed the gate math
// directly: no buffer round trip, one pass over the row. The arithmetic is sru_math.h's (the
// same exp polynomial, clamps and tanh series), so results agree with the generic loop to float
// rounding (FMA contraction may differ). docs/ops.md, "Loop order", has the measurements.
#pragma once
#if defined(__AVX2__) && defined(__FMA__)
#define SRU_HAVE_AVX2_STEP 1
#include <immintrin.h>

#include <cstdint>

namespace sru_avx2 {

// sru_math::fast_exp, eight lanes at a time.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23: round to an integer
  const __m256 shifted = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 nf = _mm256_sub_ps(shifted, magic);
  const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x4B400000));
  __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(1.42860682030941723e-6f), r);
  const __m256 r2 = _mm256_mul_ps(r, r), r4 = _mm256_mul_ps(r2, r2);
  const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0.16666520681344027f), r, _mm256_set1_ps(0.49999993450978f));
  const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0.008368710680944448f), r, _mm256_set1_ps(0.04166838749705684f));
  const __m256 q = _mm256_fmadd_ps(r4, _mm256_set1_ps(0.0013814607891620354f), _mm256_fmadd_ps(r2, hi, lo));
  const __m256 p = _mm256_fmadd_ps(r2, q, _mm256_add_ps(_mm256_set1_ps(1.0f), r));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// sru_math::tanh_t: sign(x) (1 - e) / (1 + e) with e = exp(-2|x|), a series below |x| = 0.04.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), cut = _mm256_set1_ps(0.04f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), ax));
  const __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  __m256 s = _mm256_fmadd_ps(x2, _mm256_set1_ps(-17.0f / 315.0f), _mm256_set1_ps(2.0f / 15.0f));
  s = _mm256_fmadd_ps(x2, s, _mm256_set1_ps(-1.0f / 3.0f));
  const __m256 small = _mm256_mul_ps(ax, _mm256_fmadd_ps(x2, s, one));
  const __m256 y = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, cut, _CMP_LT_OQ));
  return _mm256_or_ps(y, _mm256_and_ps(sign, x));
}

// One row of one step: units [0, n8) with n8 = n rounded down to a multiple of 8, which it
// returns (the caller's generic loop does the rest). Same meaning as the generic loop: u holds
// n (u0, u1, u2) triples; c_next may be c_prev (in place), each vector is read before written.
template <int SKIP, bool TANH, bool MASK>
inline int64_t forward_step_k3(const float* u, const float* c_prev, const float* vf, const float* vr,
                               const float* bf, const float* br, const float* mask, const float* xt,
                               float scale_x, float* c_next, float* ht, int64_t n) {
  const __m256i p0 = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
  const __m256i p1 = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
  const __m256i p2 = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
  const __m256 scale = _mm256_set1_ps(scale_x);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // The blends and permutes of deinterleave3: lane i of u0/u1/u2 = unit j+i's u0/u1/u2.
    const float* p = u + 3 * j;
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8), c = _mm256_loadu_ps(p + 16);
    const __m256 u0 = _mm256_permutevar8x32_ps(_mm256_blend_ps(_mm256_blend_ps(a, b, 0x92), c, 0x24), p0);
    const __m256 u1 = _mm256_permutevar8x32_ps(_mm256_blend_ps(_mm256_blend_ps(a, b, 0x24), c, 0x49), p1);
    const __m256 u2 = _mm256_permutevar8x32_ps(_mm256_blend_ps(_mm256_blend_ps(a, b, 0x49), c, 0x92), p2);
    const __m256 cp = _mm256_loadu_ps(c_prev + j);
    const __m256 f = sigmoid8(_mm256_add_ps(_mm256_fmadd_ps(_mm256_loadu_ps(vf + j), cp, u1), _mm256_loadu_ps(bf + j)));
    const __m256 r = sigmoid8(_mm256_add_ps(_mm256_fmadd_ps(_mm256_loadu_ps(vr + j), cp, u2), _mm256_loadu_ps(br + j)));
    const __m256 cn = _mm256_fmadd_ps(f, _mm256_sub_ps(cp, u0), u0);  // u0 + f (c_prev - u0)
    _mm256_storeu_ps(c_next + j, cn);
    const __m256 g = TANH ? tanh8(cn) : cn;
    const __m256 rm = MASK ? _mm256_mul_ps(r, _mm256_loadu_ps(mask + j)) : r;
    if constexpr (SKIP == 0) {
      _mm256_storeu_ps(ht + j, _mm256_mul_ps(rm, g));
    } else {
      const __m256 xs = _mm256_mul_ps(_mm256_loadu_ps(xt + j), scale);
      _mm256_storeu_ps(ht + j, _mm256_fmadd_ps(rm, _mm256_sub_ps(g, xs), xs));  // x' + r (g - x')
    }
  }
  return j;
}

}  // namespace sru_avx2
#endif
