// Elementwise math of the fused CPU kernels (sru_recurrence.cpp): an exp the compiler can
// vectorise, and the sigmoid and tanh built on it. float64 uses std::exp (the exact path that
// gradcheck runs).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace sru_math {

// exp for float that the compiler can vectorise (std::exp has no SIMD variant without
// -ffast-math): Cody-Waite range reduction, a degree-6 minimax polynomial on |r| <= ln(2)/2
// (relative error 3e-9, below float rounding; fitted by python -m bench.cpu_kernel --fit-exp-poly) evaluated
// Estrin-style (a shorter dependency chain than Horner: the k = 3 forward got measurably faster), then
// scale by 2^n built from the exponent bits. Its min/max only
// vectorise with -fno-trapping-math (set by build.py).
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);  // keeps 2^n a normal float
  // n = round(x / ln 2) by adding 1.5 * 2^23: the sum's low mantissa bits then hold n itself,
  // so no float->int conversion or sign select is needed (the fwd kernel got ~25% faster).
  // Exact for |x / ln 2| < 2^22; the compiler may not re-associate it away (no -ffast-math).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float nf = shifted - 12582912.0f;
  int32_t n;
  std::memcpy(&n, &shifted, sizeof(n));
  n -= 0x4B400000;  // the bit pattern of 1.5 * 2^23
  const float r = (x - nf * 0.693145751953125f) - nf * 1.42860682030941723e-6f;
  const float r2 = r * r, r4 = r2 * r2;
  const float q = (0.49999993450978f + 0.16666520681344027f * r) +
                  r2 * (0.04166838749705684f + 0.008368710680944448f * r) + r4 * 0.0013814607891620354f;
  const float p = (1.0f + r) + r2 * q;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

inline float exp_t(float x) { return fast_exp(x); }
inline double exp_t(double x) { return std::exp(x); }  // float64 is the exact path (gradcheck)

template <typename T>
inline T sigmoid(T x) { return T(1) / (T(1) + exp_t(-x)); }

template <typename T>
inline T tanh_t(T x) {
  // tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|); a short series near 0 avoids the
  // cancellation in 1 - e. Written branch-free so the vector loop keeps it.
  const T ax = std::abs(x);
  const T e = exp_t(T(-2) * ax);
  const T big = (T(1) - e) / (T(1) + e);
  const T sx = std::min(ax, T(0.04));  // series argument, kept small so it cannot overflow
  const T x2 = sx * sx;
  const T small = sx * (T(1) + x2 * (T(-1) / T(3) + x2 * (T(2) / T(15) + x2 * (T(-17) / T(315)))));
  // An arithmetic blend, not a select: GCC would not vectorise the select.
  const T use_series = static_cast<T>(ax < T(0.04));
  const T y = use_series * small + (T(1) - use_series) * big;
  return std::copysign(y, x);
}

}  // namespace sru_math
