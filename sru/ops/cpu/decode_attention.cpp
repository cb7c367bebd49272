// Attention of a few queries over cached keys: the decoding steps of beam search (decoding.py says
// when it runs). One (sentence, head) pair at a time, its queries in registers while its keys and values stream
// past once, and the next pair's keys and values prefetched meanwhile: at a real decode's shapes the keys and
// values are out of cache, and torch's flash kernel (two small GEMMs per pair) waited on them
// (docs/design_notes.md#beam-search).
//
//   out[g, h, i] = sum_w softmax_w(q[g, h, i] . k[g, h, w] * scale + mask[g, h, i, w]) v[g, h, w]
//
// One query per pair over keys and values stored as rows of every pair ((W, G, H, D): SRU++'s decoding cache,
// sru/ops/cpu/srupp_step.cpp) streams each row once for all pairs instead (rows_at_once): out of cache the
// pair-by-pair pass read a sequence's keys 16 KB apart (32 sequences x 128 floats a row), a stride the
// prefetchers do not follow; in cache the two passes take the same time.
//
// float32, head size D = 16 * DV (DV = 1, 2, 4 or 8); strides in floats, the last dimension contiguous; the
// additive mask (0 / -inf) broadcast through zero strides, or none. A query that may read no key gets zeros.
// Compiled only where the compiler targets AVX-512 (the build's -march=native); elsewhere
// sru_decode_attention_available() is 0 and the caller keeps torch's kernel.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>

namespace {

constexpr int kAccumulators = 24;  // of the 32 zmm registers; the rest hold a key or value row

struct Pair {  // one (sentence, head): its first query / key / value / mask element and their row strides
  const float *q, *k, *v, *mask;
  int64_t queries, keys, q_row, k_row, v_row, mask_row, mask_col;
  float scale;
  float* out;  // (queries, D), contiguous
};

__mmask16 lanes_left(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

// exp as sru_math::fast_exp (Cody-Waite reduction, the same degree-6 polynomial), 16 lanes; scalef applies 2^n
__m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.f)), _mm512_set1_ps(88.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x));
  const __m512 r2 = _mm512_mul_ps(r, r), r4 = _mm512_mul_ps(r2, r2);
  const __m512 low = _mm512_fmadd_ps(_mm512_set1_ps(0.16666520681344027f), r, _mm512_set1_ps(0.49999993450978f));
  const __m512 mid = _mm512_fmadd_ps(_mm512_set1_ps(0.008368710680944448f), r, _mm512_set1_ps(0.04166838749705684f));
  const __m512 q = _mm512_fmadd_ps(r4, _mm512_set1_ps(0.0013814607891620354f), _mm512_fmadd_ps(r2, mid, low));
  return _mm512_scalef_ps(_mm512_fmadd_ps(r2, q, _mm512_add_ps(_mm512_set1_ps(1.f), r)), n);
}

// scores[i * keys + w] = q_i . k_w * scale + mask, for queries first .. first + CHUNK - 1
template <int DV, int CHUNK>
void scores_chunk(const Pair& p, int64_t first, float* scores) {
  __m512 q[CHUNK][DV];
  for (int i = 0; i < CHUNK; ++i)
    for (int c = 0; c < DV; ++c)
      q[i][c] = _mm512_mul_ps(_mm512_loadu_ps(p.q + (first + i) * p.q_row + 16 * c), _mm512_set1_ps(p.scale));
  for (int64_t w = 0; w < p.keys; ++w) {
    __m512 k[DV];
    for (int c = 0; c < DV; ++c) k[c] = _mm512_loadu_ps(p.k + w * p.k_row + 16 * c);
    for (int i = 0; i < CHUNK; ++i) {
      __m512 acc = _mm512_mul_ps(q[i][0], k[0]);
      for (int c = 1; c < DV; ++c) acc = _mm512_fmadd_ps(q[i][c], k[c], acc);
      float s = _mm512_reduce_add_ps(acc);
      if (p.mask) s += p.mask[(first + i) * p.mask_row + w * p.mask_col];
      scores[(first + i) * p.keys + w] = s;
    }
  }
}

// each query's scores -> exp(score - max) in place (0 where masked); totals[i] = their sum (0: no key to read)
void softmax_rows(float* scores, float* totals, int64_t queries, int64_t keys) {
  const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < queries; ++i) {
    float* row = scores + i * keys;
    __m512 top = minus_infinity;
    for (int64_t w = 0; w < keys; w += 16) {
      const __mmask16 lanes = lanes_left(keys - w);
      top = _mm512_mask_max_ps(top, lanes, top, _mm512_maskz_loadu_ps(lanes, row + w));
    }
    const float most = _mm512_reduce_max_ps(top);
    __m512 total = _mm512_setzero_ps();
    if (most != -INFINITY) {
      const __m512 shift = _mm512_set1_ps(most);
      for (int64_t w = 0; w < keys; w += 16) {
        const __mmask16 lanes = lanes_left(keys - w);
        const __m512 s = _mm512_maskz_loadu_ps(lanes, row + w);
        const __mmask16 open = _mm512_mask_cmp_ps_mask(lanes, s, minus_infinity, _CMP_NEQ_OQ);
        const __m512 e = _mm512_maskz_mov_ps(open, exp16(_mm512_sub_ps(s, shift)));
        _mm512_mask_storeu_ps(row + w, lanes, e);
        total = _mm512_add_ps(total, e);
      }
    } else {
      for (int64_t w = 0; w < keys; ++w) row[w] = 0.f;
    }
    totals[i] = _mm512_reduce_add_ps(total);
  }
}

// out_i = sum_w weight[i, w] v_w / total_i for queries first .. first + CHUNK - 1
template <int DV, int CHUNK>
void values_chunk(const Pair& p, int64_t first, const float* weights, const float* totals) {
  __m512 acc[CHUNK][DV];
  for (int i = 0; i < CHUNK; ++i)
    for (int c = 0; c < DV; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int64_t w = 0; w < p.keys; ++w) {
    __m512 v[DV];
    for (int c = 0; c < DV; ++c) v[c] = _mm512_loadu_ps(p.v + w * p.v_row + 16 * c);
    for (int i = 0; i < CHUNK; ++i) {
      const __m512 weight = _mm512_set1_ps(weights[(first + i) * p.keys + w]);
      for (int c = 0; c < DV; ++c) acc[i][c] = _mm512_fmadd_ps(weight, v[c], acc[i][c]);
    }
  }
  for (int i = 0; i < CHUNK; ++i) {
    const float total = totals[first + i];
    const __m512 inverse = _mm512_set1_ps(total > 0.f ? 1.f / total : 0.f);
    for (int c = 0; c < DV; ++c)
      _mm512_storeu_ps(p.out + (first + i) * 16 * DV + 16 * c, _mm512_mul_ps(acc[i][c], inverse));
  }
}

// the last queries (fewer than a chunk) as one chunk of their count: its sums run side by side
template <int DV, int N = 7>
void rest(const Pair& p, int64_t first, int64_t count, float* scores, const float* totals, bool values) {
  if constexpr (N > 0) {
    if (count != N) return rest<DV, N - 1>(p, first, count, scores, totals, values);
    if (values) values_chunk<DV, N>(p, first, scores, totals);
    else scores_chunk<DV, N>(p, first, scores);
  }
}

// queries in chunks of as many as the registers hold, then the rest as one chunk
template <int DV>
void one_pair(const Pair& p, float* scores, float* totals) {
  constexpr int chunk = kAccumulators / DV < 8 ? kAccumulators / DV : 8;
  const int64_t whole = p.queries - p.queries % chunk;
  for (int64_t i = 0; i < whole; i += chunk) scores_chunk<DV, chunk>(p, i, scores);
  rest<DV>(p, whole, p.queries - whole, scores, totals, false);
  softmax_rows(scores, totals, p.queries, p.keys);
  for (int64_t i = 0; i < whole; i += chunk) values_chunk<DV, chunk>(p, i, scores, totals);
  rest<DV>(p, whole, p.queries - whole, scores, totals, true);
}

void prefetch_rows(const float* first, int64_t rows, int64_t row_stride, int64_t row_floats) {
  const char* base = reinterpret_cast<const char*>(first);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_floats * 4; b += 64) _mm_prefetch(base + (r * row_stride) * 4 + b, _MM_HINT_T0);
}

// One query per pair, the pairs' keys and values rows of one buffer ((W, G, H, D), SRU++'s cache): each row
// is read once for every pair of this thread (pairs first .. first + n - 1, their part of the row contiguous),
// in order, instead of each pair's keys at a stride of a whole row (at B = 32, 64 positions, one page a key
// row: the prefetchers could not follow). q and out (n, D) contiguous.
template <int DV>
void rows_at_once(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t W,
                  int64_t row, float scale, float* scores, float* totals) {
  constexpr int64_t D = 16 * DV;
  for (int64_t w = 0; w < W; ++w) {
    const float* keys = k + w * row;
    for (int64_t i = 0; i < n; ++i) {
      __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
      for (int c = 0; c < DV; c += 2) {
        even = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * D + 16 * c), _mm512_loadu_ps(keys + i * D + 16 * c), even);
        if (c + 1 < DV)
          odd = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * D + 16 * c + 16), _mm512_loadu_ps(keys + i * D + 16 * c + 16),
                                odd);
      }
      scores[i * W + w] = _mm512_reduce_add_ps(_mm512_add_ps(even, odd)) * scale;
    }
  }
  softmax_rows(scores, totals, n, W);
  for (int64_t i = 0; i < n * D; i += 16) _mm512_storeu_ps(out + i, _mm512_setzero_ps());
  for (int64_t w = 0; w < W; ++w) {
    const float* values = v + w * row;
    for (int64_t i = 0; i < n; ++i) {
      const __m512 weight = _mm512_set1_ps(scores[i * W + w]);
      for (int c = 0; c < DV; ++c)
        _mm512_storeu_ps(out + i * D + 16 * c, _mm512_fmadd_ps(weight, _mm512_loadu_ps(values + i * D + 16 * c),
                                                              _mm512_loadu_ps(out + i * D + 16 * c)));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const __m512 inverse = _mm512_set1_ps(totals[i] > 0.f ? 1.f / totals[i] : 0.f);
    for (int c = 0; c < DV; ++c)
      _mm512_storeu_ps(out + i * D + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(out + i * D + 16 * c), inverse));
  }
}

// whether q, k and v are laid out for rows_at_once: one query, no mask, q (G, H, 1, D) contiguous, k and v
// rows of (G, H, D) contiguous
bool rows_of_all_pairs(int64_t G, int64_t H, int64_t Q, int64_t D, const float* mask, const int64_t* q_stride,
                       const int64_t* k_stride, const int64_t* v_stride) {
  const auto packed = [&](const int64_t* s) { return s[0] == H * D && s[1] == D && s[3] == 1; };
  return Q == 1 && mask == nullptr && packed(q_stride) && packed(k_stride) && packed(v_stride) &&
         k_stride[2] == G * H * D && v_stride[2] == k_stride[2];
}

}  // namespace

extern "C" int sru_decode_attention_available() { return 1; }

// q (G, H, Q, D), k / v (G, H, W, D), mask (G, H, Q, W) through strides (0 where broadcast) or null; out
// (G, H, Q, D) contiguous. Returns 0 (out untouched) for a head size it is not compiled for.
extern "C" int sru_decode_attention(const float* q, const float* k, const float* v, const float* mask,
                                    float* out, int64_t G, int64_t H, int64_t Q, int64_t W, int64_t D,
                                    const int64_t* q_stride, const int64_t* k_stride,
                                    const int64_t* v_stride, const int64_t* mask_stride, float scale,
                                    int threads) {
  if (D != 16 && D != 32 && D != 64 && D != 128) return 0;
  if (rows_of_all_pairs(G, H, Q, D, mask, q_stride, k_stride, v_stride)) {
#pragma omp parallel num_threads(threads)
    {  // each thread its share of the pairs, every row streamed once
      const int64_t pairs = G * H, count = omp_get_num_threads(), id = omp_get_thread_num();
      const int64_t first = pairs * id / count, n = pairs * (id + 1) / count - first;
      std::vector<float> scores(n * W), totals(n);
      const int64_t row = k_stride[2];
      if (n > 0) switch (D) {
          case 16: rows_at_once<1>(q + first * D, k + first * D, v + first * D, out + first * D, n, W, row, scale,
                                   scores.data(), totals.data()); break;
          case 32: rows_at_once<2>(q + first * D, k + first * D, v + first * D, out + first * D, n, W, row, scale,
                                   scores.data(), totals.data()); break;
          case 64: rows_at_once<4>(q + first * D, k + first * D, v + first * D, out + first * D, n, W, row, scale,
                                   scores.data(), totals.data()); break;
          default: rows_at_once<8>(q + first * D, k + first * D, v + first * D, out + first * D, n, W, row, scale,
                                   scores.data(), totals.data()); break;
        }
    }
    return 1;
  }
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> scores(Q * W), totals(Q);
#pragma omp for schedule(static)
    for (int64_t gh = 0; gh < G * H; ++gh) {
      if (gh + 1 < G * H) {  // the next pair's keys and values, while this one computes
        const int64_t g = (gh + 1) / H, h = (gh + 1) % H;
        prefetch_rows(k + g * k_stride[0] + h * k_stride[1], W, k_stride[2], D);
        prefetch_rows(v + g * v_stride[0] + h * v_stride[1], W, v_stride[2], D);
      }
      const int64_t g = gh / H, h = gh % H;
      Pair p;
      p.q = q + g * q_stride[0] + h * q_stride[1];
      p.k = k + g * k_stride[0] + h * k_stride[1];
      p.v = v + g * v_stride[0] + h * v_stride[1];
      p.mask = mask ? mask + g * mask_stride[0] + h * mask_stride[1] : nullptr;
      p.queries = Q, p.keys = W;
      p.q_row = q_stride[2], p.k_row = k_stride[2], p.v_row = v_stride[2];
      p.mask_row = mask ? mask_stride[2] : 0, p.mask_col = mask ? mask_stride[3] : 0;
      p.scale = scale;
      p.out = out + gh * Q * D;
      switch (D) {
        case 16: one_pair<1>(p, scores.data(), totals.data()); break;
        case 32: one_pair<2>(p, scores.data(), totals.data()); break;
        case 64: one_pair<4>(p, scores.data(), totals.data()); break;
        default: one_pair<8>(p, scores.data(), totals.data()); break;
      }
    }
  }
  return 1;
}

#else  // no AVX-512: the caller keeps torch's kernel

extern "C" int sru_decode_attention_available() { return 0; }
extern "C" int sru_decode_attention(const float*, const float*, const float*, const float*, float*, int64_t,
                                    int64_t, int64_t, int64_t, int64_t, const int64_t*, const int64_t*,
                                    const int64_t*, const int64_t*, float, int) {
  return 0;
}

#endif
