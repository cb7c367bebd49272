// What beam search needs of a decoding step's logits, in one pass per row (decoding.py says why):
// each row's log-partition log(sum_v exp(x_v)) over the whole vocabulary, the banned tokens set to -inf
// in place, and the maximum of every run of `run` tokens after that. torch.log_softmax writes all of
// log p and the run maxima read it again; here the row is read from memory once (the exp pass finds it
// in L1), and log p = x - log_partition is left for the few continuations search keeps.
#include <cmath>
#include <cstdint>

#include "sru_math.h"

extern "C" void sru_beam_rows(float* logits, int64_t rows, int64_t vocab, int64_t run,
                              const int64_t* banned, int64_t n_banned, float* log_partition, float* run_max,
                              int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    float* row = logits + i * vocab;
    // the banned logits count in the partition (log_softmax's normalisation) but in no run maximum
    float top = -INFINITY;
    float banned_values[8];
    for (int64_t b = 0; b < n_banned; ++b) {
      banned_values[b] = row[banned[b]];
      top = std::max(top, banned_values[b]);
      row[banned[b]] = -INFINITY;
    }
    float* maxima = run_max + i * (vocab / run);
    for (int64_t j = 0; j < vocab / run; ++j) {
      float best = -INFINITY;
#pragma omp simd reduction(max : best)
      for (int64_t t = 0; t < run; ++t) best = std::max(best, row[j * run + t]);
      maxima[j] = best;
      top = std::max(top, best);
    }
    float total = 0.f;
    // a banned -inf adds fast_exp(-87) ~ 1.6e-38 (it clamps there): nothing a float sum of at least 1 keeps
#pragma omp simd reduction(+ : total)
    for (int64_t t = 0; t < vocab; ++t) total += sru_math::fast_exp(row[t] - top);
    for (int64_t b = 0; b < n_banned; ++b) total += sru_math::fast_exp(banned_values[b] - top);
    log_partition[i] = top + std::log(total);
  }
}
