// The two passes around an int8 product with one activation scale per token (row), for
// sru/ops/cpu/int8.py: quantise each row of x by its own max |x| into uint8 (the layout oneDNN's
// u8 x s8 GEMM reads), and after the product multiply each output row by that max (adding the
// bias). Why in C: as torch ops the quantiser is five passes over the input (max, min, scale,
// round, cast) and cost more than the int8 GEMM itself; fused it is one read to find the row's
// maximum and one to write its bytes (docs/design_notes.md#int8-and-bf16).
#include <cstdint>
#include <cstring>

namespace {

// max |v| over a row as the largest absolute value's bit pattern: for non-negative floats the
// order of the bit patterns is the order of the values, and an integer maximum vectorises
// (a float one does not without -ffast-math). A NaN has a larger pattern than any number, so
// it becomes the row's scale and the row's output is NaN.
float row_abs_max(const float* x, int64_t width) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(x);
  uint32_t top = 0;
  for (int64_t i = 0; i < width; ++i) {
    const uint32_t b = bits[i] & 0x7fffffffu;
    top = b > top ? b : top;
  }
  float m;
  std::memcpy(&m, &top, sizeof m);
  return m;
}

}  // namespace

extern "C" {

// q[r, i] = round(x[r, i] * levels / m_r) + levels + 1 as uint8, m_r = max(max_i |x[r, i]|,
// 1e-30) (NaN if the row holds one), stored in row_max[r]. levels 127 uses 1..255 (zero point 128); 63 (CPUs without VNNI,
// whose u8 x s8 pair sums saturate at 16 bits) uses 1..127. Rounds half up: the value before
// the cast is positive, so truncation after adding one half rounds.
void sru_quantize_rows_u8(const float* x, int64_t rows, int64_t width, int64_t levels, uint8_t* q,
                          float* row_max, int64_t num_threads) {
  const float zero_point_half = static_cast<float>(levels + 1) + 0.5f;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1 && rows * width >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    float m = row_abs_max(xr, width);
    m = (m > 1e-30f || m != m) ? m : 1e-30f;  // a NaN stays: the row's output is NaN, as in float32
    row_max[r] = m;
    const float inv = static_cast<float>(levels) / m;
    uint8_t* qr = q + r * width;
    for (int64_t i = 0; i < width; ++i) qr[i] = static_cast<uint8_t>(static_cast<int32_t>(xr[i] * inv + zero_point_half));
  }
}

// out[r, j] = out[r, j] * row_scale[r] (+ bias[j] when bias is not null), in place.
void sru_scale_rows(float* out, int64_t rows, int64_t width, const float* row_scale, const float* bias,
                    int64_t num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1 && rows * width >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * width;
    const float s = row_scale[r];
    if (bias != nullptr) {
      for (int64_t j = 0; j < width; ++j) o[j] = o[j] * s + bias[j];
    } else {
      for (int64_t j = 0; j < width; ++j) o[j] *= s;
    }
  }
}

}  // extern "C"
