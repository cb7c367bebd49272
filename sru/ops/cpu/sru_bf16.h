// bfloat16 storage for the fused CPU kernel (sru_recurrence.cpp): U read as bf16 and grad U written
// as bf16, the recurrence itself in float32 (issue 69: bf16 training under autocast, where U comes
// out of a bf16 GEMM and grad U goes into two; converting inside the kernel spares a float32 copy
// of each, three times the state's size, per layer and step).
//
// The conversions are torch's own (c10::BFloat16): widening shifts the 16 bits up; narrowing rounds
// to nearest even and keeps NaN a (quiet) NaN, so results match `t.float()` / `t.bfloat16()` bit
// for bit. Plain loops over uint16_t that the compiler vectorises (#pragma omp simd).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace sru_bf16 {

inline float widen(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t narrow(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? (bits >> 16) | 0x40u : rounded);
}

// n bf16 values at src -> float at dst.
inline void widen_row(const uint16_t* src, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = widen(src[j]);
}

// n floats at src -> bf16 at dst. With AVX512-BF16 one instruction rounds 16 (to nearest even, as
// narrow; it also flushes denormals, below 1.2e-38, to zero): the backward's grad U got faster.
inline void narrow_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t j = 0;
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
#endif
#pragma omp simd
  for (int64_t k = j; k < n; ++k) dst[k] = narrow(src[k]);
}

// U's storage: T itself, or bf16 (uint16_t) widened to T = float as each step's row is read.
template <typename T, bool BF16U>
using UStore = typename std::conditional<BF16U, uint16_t, T>::type;

// One step's row of U (n values) as T: in place, or a bf16 row widened into `wide`.
template <typename T, bool BF16U>
inline const T* row_of_U(const UStore<T, BF16U>* row, T* wide, int64_t n) {
  if constexpr (BF16U) {
    widen_row(row, wide, n);
    return wide;
  } else {
    return row;
  }
}

// Where one step's row of grad U is computed: in place, or in `wide` (narrowed to bf16 afterwards).
template <typename T, bool BF16U>
inline T* grad_row_of_U(UStore<T, BF16U>* row, T* wide) {
  if constexpr (BF16U) return wide; else return row;
}

}  // namespace sru_bf16
