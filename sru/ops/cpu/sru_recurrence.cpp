// Fused SRU elementwise recurrence for CPU: forward and backward, float32 and float64.
//
// Plain C++ + OpenMP with a C ABI (no torch headers), so the lazy build takes seconds, not a
// minute; Python (sru/ops/cpu/kernel.py) allocates every tensor and passes raw pointers in
// one SruArgs struct. Equations: docs/spec.md#forward-recurrence and docs/spec.md#backward;
// layouts: docs/spec.md#memory-layout; the executable reference: sru/ops/reference.py.
//
// Work split: one task = (a block of batch rows, direction, a chunk of hidden units). Tasks are
// independent across all time steps, so threads never synchronise inside the time loop; a task
// walks time outside and its rows inside (adjacent rows of every (L, B, .) tensor, so memory is
// read in order), and the inner loop runs over contiguous hidden units, vectorised
// (#pragma omp simd; float32 k = 3 on AVX2: the hand-written steps of sru_avx2.h first, this loop
// for the last < 8 units). Backward sums the shared weight_c/bias gradients over time per row into a
// (B, 4, dirs*d) buffer with one writer per element (no races), then over B in a fixed order (so
// results do not depend on the thread count). With a bf16 U (the _bf16u entries: bf16 training), each
// step's row of U is widened into a float buffer and grad U narrowed back from one (sru_bf16.h);
// everything else, the states and every other gradient, stays float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "sru_args.h"
#include "sru_avx2.h"
#include "sru_bf16.h"
#include "sru_math.h"
#include "sru_work.h"

namespace {

using sru_math::sigmoid;
using sru_math::tanh_t;
using sru_bf16::UStore;
using sru_bf16::grad_row_of_U;
using sru_bf16::row_of_U;

using sru_work::Layout;
using sru_work::grouped_walk;
using sru_work::layout_of;
using sru_work::pick_chunk;
using sru_work::pick_group;
using sru_work::split_work;
using sru_work::worth_threads;
using sru_work::Split;

// The layout/flag switches of one call. Fixed<...> makes them compile-time constants, so a
// kernel gets one specialised, branch-free vector loop per combination; Runtime keeps them as
// plain values (one generic, scalar loop).
template <int K_, int SKIP_, bool TANH_, bool MASK_, bool PERSTEP_>
struct Fixed {
  static constexpr int64_t K = K_;      // U's k: 3 or 4
  static constexpr int SKIP = SKIP_;    // skip_mode
  static constexpr bool TANH = TANH_, MASK = MASK_, PERSTEP = PERSTEP_;
  static constexpr bool PLANAR = K_ == 3;  // forward de-interleaves U first (float32 only)
};
struct Runtime {
  static constexpr bool PLANAR = false;
  int64_t K;
  int SKIP;
  bool TANH, MASK, PERSTEP;
};

template <typename T, bool BF16U, class Cfg>
void forward_kernel(const SruArgs& a, const Cfg cfg) {
  const int64_t K = cfg.K;
  const int SKIP = cfg.SKIP;
  const bool TANH = cfg.TANH, MASK = cfg.MASK, PERSTEP = cfg.PERSTEP;
  const int64_t L = a.length, B = a.batch, d = a.hidden, dirs = a.dirs, D = dirs * d;
  const UStore<T, BF16U>* U = static_cast<const UStore<T, BF16U>*>(a.U);
  const T* x = static_cast<const T*>(a.x);
  const T* wc = static_cast<const T*>(a.weight_c);
  const T* bias = static_cast<const T*>(a.bias);
  const T* c0 = static_cast<const T*>(a.c0);
  const T* mask_c = static_cast<const T*>(a.mask_c);
  const uint8_t* pad = a.mask_pad;
  T* h = static_cast<T*>(a.h);
  T* c_all = static_cast<T*>(a.c_all);
  T* c_last = static_cast<T*>(a.c_last);
  const T scale_x = static_cast<T>(a.scale_x);
  const int64_t threads = std::max<int64_t>(1, a.num_threads);
  const Split split = split_work(L, B, d, dirs, threads);
  const int64_t chunk = split.chunk, nchunks = split.nchunks, group = split.group, ntasks = split.ntasks;
  const Layout lay = layout_of(a);

#pragma omp parallel num_threads(threads) if (worth_threads(threads, ntasks, L * B * D))
  {
    std::vector<T> state(group * chunk);  // c of each batch row when c_all is not stored
    constexpr bool planar = Cfg::PLANAR && std::is_same<T, float>::value;
    std::vector<T> planes(planar ? 3 * chunk : 0);  // one step's u0, u1, u2 rows
    std::vector<T> wide(BF16U ? K * chunk : 0);  // one step's row of a bf16 U, widened
    // Dynamic: on a busy machine a descheduled thread must not hold back half of the tasks.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntasks; ++task) {
      const int64_t dir = task / nchunks % dirs, b0 = task / nchunks / dirs * group;
      const int64_t b1 = std::min(B, b0 + group);
      const int64_t j0 = task % nchunks * chunk, n = std::min(chunk, d - j0);
      const int64_t col = dir * d + j0;  // offset inside one (dirs*d) row
      for (int64_t b = b0; b < b1; ++b) {
        T* cb = state.data() + (b - b0) * chunk;
        for (int64_t j = 0; j < n; ++j) cb[j] = c0 ? c0[b * D + col + j] : T(0);
      }
      const T *vf = wc + col, *vr = wc + D + col, *bf = bias + col, *br = bias + D + col;

      // Time outside, the group's batch rows inside: one step of the group reads adjacent rows of
      // U, x and h, so memory is walked in order (docs/ops.md, "Loop order").
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = dir == 0 ? s : L - 1 - s;
        const int64_t t_prev = dir == 0 ? t - 1 : t + 1;
        for (int64_t b = b0; b < b1; ++b) {
          if (!lay.present(t, b)) continue;  // packed: this sequence has no step t
          T* cbuf = state.data() + (b - b0) * chunk;
          const T* c_prev = lay.first(s, t_prev, b) || !c_all ? cbuf : c_all + (lay.start(t_prev) + b) * D + col;
          const int64_t row = (lay.start(t) + b) * D + col;
          T* c_next = c_all ? c_all + row : cbuf;  // in place when not stored
          T* ht = h + row;
          if (pad && pad[t * B + b]) {  // padded step: state carried, output 0
            for (int64_t j = 0; j < n; ++j) { c_next[j] = c_prev[j]; ht[j] = T(0); }
            continue;
          }
          const T* m = MASK ? mask_c + b * D + col : nullptr;
          const T* u = row_of_U<T, BF16U>(U + row * K, wide.data(), n * K);
          const T* w = PERSTEP ? wc + row * 2 : nullptr;
          const T* xt = SKIP == 1 ? x + row : nullptr;
          // Where u0/u1/u2 of unit j are: planes[j], planes[chunk + j], ... or u[j*K + 0/1/2].
          const T *g0 = u, *g1 = u + 1, *g2 = u + 2;
          const int64_t S = planar ? 1 : K;
          int64_t done = 0;  // units already computed by the AVX2 step
          if constexpr (planar) {
#ifdef SRU_HAVE_AVX2_STEP
            done = sru_avx2::forward_step_k3<Cfg::SKIP, Cfg::TANH, Cfg::MASK>(
                u, c_prev, vf, vr, bf, br, m, xt, scale_x, c_next, ht, n);
#endif
            T* p = planes.data();
            sru_avx2::deinterleave3(u + 3 * done, p + done, p + chunk + done, p + 2 * chunk + done, n - done);
            g0 = p, g1 = p + chunk, g2 = p + 2 * chunk;
          }
#pragma omp simd
          for (int64_t j = done; j < n; ++j) {
            const T cp = c_prev[j];
            const T u0 = g0[j * S];
            const T f = sigmoid<T>(g1[j * S] + (PERSTEP ? w[2 * j] : vf[j]) * cp + bf[j]);
            const T r = sigmoid<T>(g2[j * S] + (PERSTEP ? w[2 * j + 1] : vr[j]) * cp + br[j]);
            const T c = u0 + f * (cp - u0);
            c_next[j] = c;
            const T g = TANH ? tanh_t<T>(c) : c;
            const T rm = MASK ? r * m[j] : r;
            if (SKIP == 0) {
              ht[j] = rm * g;
            } else {
              const T xs = SKIP == 1 ? xt[j] * scale_x : u[j * K + 3];
              ht[j] = xs + rm * (g - xs);
            }
          }
        }
      }
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t t_end = dir == 0 ? lay.length(b) - 1 : 0;  // the direction's last step
        const T* c_end = c_all && t_end >= 0 ? c_all + (lay.start(t_end) + b) * D + col
                                             : state.data() + (b - b0) * chunk;
        for (int64_t j = 0; j < n; ++j) c_last[b * D + col + j] = c_end[j];
      }
    }
  }
}

template <typename T, bool BF16U, class Cfg>
void backward_kernel(const SruArgs& a, const Cfg cfg) {
  const int64_t K = cfg.K;
  const int SKIP = cfg.SKIP;
  const bool TANH = cfg.TANH, MASK = cfg.MASK, PERSTEP = cfg.PERSTEP;
  const int64_t L = a.length, B = a.batch, d = a.hidden, dirs = a.dirs, D = dirs * d;
  const UStore<T, BF16U>* U = static_cast<const UStore<T, BF16U>*>(a.U);
  const T* x = static_cast<const T*>(a.x);
  const T* wc = static_cast<const T*>(a.weight_c);
  const T* bias = static_cast<const T*>(a.bias);
  const T* c0 = static_cast<const T*>(a.c0);
  const T* mask_c = static_cast<const T*>(a.mask_c);
  const uint8_t* pad = a.mask_pad;
  const T* c_all = static_cast<const T*>(a.c_all);
  const T* grad_h = static_cast<const T*>(a.grad_h);
  const T* grad_c_last = static_cast<const T*>(a.grad_c_last);
  UStore<T, BF16U>* gU = static_cast<UStore<T, BF16U>*>(a.grad_U);
  T* gx = static_cast<T*>(a.grad_x);
  T* gwc = static_cast<T*>(a.grad_weight_c);
  T* gbias = static_cast<T*>(a.grad_bias);
  T* partial = static_cast<T*>(a.grad_partial);
  T* gc0 = static_cast<T*>(a.grad_c0);
  T* gmask = static_cast<T*>(a.grad_mask_c);
  const T scale_x = static_cast<T>(a.scale_x);
  const int64_t threads = std::max<int64_t>(1, a.num_threads);
  // Split like the forward: time outside (in reverse), a block of batch rows inside.
  const Split split = split_work(L, B, d, dirs, threads);
  const int64_t chunk = split.chunk, nchunks = split.nchunks, group = split.group, ntasks = split.ntasks;
  const Layout lay = layout_of(a);

#pragma omp parallel num_threads(threads) if (worth_threads(threads, ntasks, L * B * D))
  {
    // Per row of the group: gc, the initial state, and the sums over time: gb_f, gb_r, gv_f,
    // gv_r, g_mask.
    std::vector<T> buf(group * 7 * chunk);
    std::vector<T> wide(BF16U ? 2 * K * chunk : 0);  // a bf16 U's row widened, then its grad U row
    // Dynamic: on a busy machine a descheduled thread must not hold back half of the tasks.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntasks; ++task) {
      const int64_t dir = task / nchunks % dirs, b0 = task / nchunks / dirs * group;
      const int64_t b1 = std::min(B, b0 + group);
      const int64_t j0 = task % nchunks * chunk, n = std::min(chunk, d - j0);
      const int64_t col = dir * d + j0;
      std::fill(buf.begin(), buf.end(), T(0));
      for (int64_t b = b0; b < b1; ++b) {
        T *gc = buf.data() + (b - b0) * 7 * chunk, *cinit = gc + chunk;
        for (int64_t j = 0; j < n; ++j) {
          gc[j] = grad_c_last ? grad_c_last[b * D + col + j] : T(0);
          cinit[j] = c0 ? c0[b * D + col + j] : T(0);
        }
      }
      const T *vf = wc + col, *vr = wc + D + col, *bf = bias + col, *br = bias + D + col;

      for (int64_t s = L - 1; s >= 0; --s) {  // reverse order of the forward pass
        const int64_t t = dir == 0 ? s : L - 1 - s;
        const int64_t t_prev = dir == 0 ? t - 1 : t + 1;
        for (int64_t b = b0; b < b1; ++b) {
          if (!lay.present(t, b)) continue;  // packed: no step t here; gc passes through unchanged
          T *gc = buf.data() + (b - b0) * 7 * chunk, *cinit = gc + chunk, *acc = cinit + chunk;
          T *sbf = acc, *sbr = acc + chunk, *svf = acc + 2 * chunk, *svr = acc + 3 * chunk;
          T* smask = acc + 4 * chunk;
          const T* m = MASK ? mask_c + b * D + col : nullptr;
          const int64_t row = (lay.start(t) + b) * D + col;
          const T* c_prev = lay.first(s, t_prev, b) ? cinit : c_all + (lay.start(t_prev) + b) * D + col;
          UStore<T, BF16U>* gu_out = gU + row * K;
          if (pad && pad[t * B + b]) {  // no gradient through a padded step; gc passes through
            std::fill(gu_out, gu_out + n * K, UStore<T, BF16U>(0));
            if (SKIP == 1) std::fill(gx + row, gx + row + n, T(0));
            if (PERSTEP) std::fill(gwc + row * 2, gwc + row * 2 + 2 * n, T(0));
            continue;
          }
          const T* u = row_of_U<T, BF16U>(U + row * K, wide.data(), n * K);
          T* gu = grad_row_of_U<T, BF16U>(gu_out, wide.data() + K * chunk);
          const T* w = PERSTEP ? wc + row * 2 : nullptr;
          const T* ct = c_all + row;
          const T* gh = grad_h + row;
          const T* xt = SKIP == 1 ? x + row : nullptr;
          T* gxt = SKIP == 1 ? gx + row : nullptr;
          T* gw = PERSTEP ? gwc + row * 2 : nullptr;
          int64_t done = 0;  // units already computed by the AVX2 step
#ifdef SRU_HAVE_AVX2_STEP
          if constexpr (Cfg::PLANAR && std::is_same<T, float>::value) {
            done = sru_avx2::backward_step_k3<Cfg::SKIP, Cfg::TANH, Cfg::MASK>(
                {u, c_prev, ct, gh, xt, m, vf, vr, bf, br, gc, smask, sbf, sbr, svf, svr, gu, gxt, scale_x}, n);
          }
#endif
#pragma omp simd
          for (int64_t j = done; j < n; ++j) {
            const T cp = c_prev[j];
            const T u0 = u[j * K];
            const T vfj = PERSTEP ? w[2 * j] : vf[j];
            const T vrj = PERSTEP ? w[2 * j + 1] : vr[j];
            const T f = sigmoid<T>(u[j * K + 1] + vfj * cp + bf[j]);
            const T r = sigmoid<T>(u[j * K + 2] + vrj * cp + br[j]);
            const T c = ct[j];
            const T g = TANH ? tanh_t<T>(c) : c;
            const T dg = TANH ? T(1) - g * g : T(1);
            const T mj = MASK ? m[j] : T(1);
            const T xs = SKIP == 0 ? T(0) : (SKIP == 1 ? xt[j] * scale_x : u[j * K + 3]);
            const T ghm = gh[j] * mj;
            if (MASK) smask[j] += gh[j] * r * (g - xs);  // h = x' + m r (g - x')
            const T gu2 = ghm * (g - xs) * r * (T(1) - r);
            const T gct = ghm * r * dg + gc[j];
            const T gu1 = gct * (cp - u0) * f * (T(1) - f);
            gu[j * K] = gct * (T(1) - f);
            gu[j * K + 1] = gu1;
            gu[j * K + 2] = gu2;
            if (K == 4) gu[j * K + 3] = SKIP == 2 ? gh[j] - ghm * r : T(0);
            if (SKIP == 1) gxt[j] = (gh[j] - ghm * r) * scale_x;
            gc[j] = gct * f + gu1 * vfj + gu2 * vrj;
            sbf[j] += gu1;
            sbr[j] += gu2;
            if (PERSTEP) {
              gw[2 * j] = gu1 * cp;
              gw[2 * j + 1] = gu2 * cp;
            } else {
              svf[j] += gu1 * cp;
              svr[j] += gu2 * cp;
            }
          }
          if constexpr (BF16U) sru_bf16::narrow_row(gu, gu_out, n * K);
        }
      }
      for (int64_t b = b0; b < b1; ++b) {
        const T *gc = buf.data() + (b - b0) * 7 * chunk, *acc = gc + 2 * chunk, *smask = acc + 4 * chunk;
        for (int64_t j = 0; j < n; ++j) {
          gc0[b * D + col + j] = gc[j];
          if (gmask) gmask[b * D + col + j] = smask[j];
          for (int q = 0; q < 4; ++q) partial[(b * 4 + q) * D + col + j] = acc[q * chunk + j];
        }
      }
    }
    // (implicit barrier) Sum the per-row partials over the batch, in a fixed order so the
    // result does not depend on the thread count. Per-step weights have no reduction.
    const int quantities = PERSTEP ? 2 : 4;  // gb_f, gb_r[, gv_f, gv_r]
#pragma omp for schedule(static)
    for (int64_t j = 0; j < D; ++j) {
      for (int q = 0; q < quantities; ++q) {
        T sum = T(0);
        for (int64_t b = 0; b < B; ++b) sum += partial[(b * 4 + q) * D + j];
        // gbias = [gb_f ; gb_r], gwc = [gv_f ; gv_r], each half (dirs*d) long.
        (q < 2 ? gbias : gwc)[(q % 2) * D + j] = sum;
      }
    }
  }
}

// Turn the runtime flags into a configuration. The float32 hot paths (shared gate weights;
// every k/skip layout, with or without dropout mask and tanh) get Fixed<...>, one vectorised
// loop each; float64 and per-step gate weights (rare) share one Runtime loop each, which keeps
// the lazy build short.
template <typename T, bool BF16U, class Cfg>
int run(const SruArgs& a, bool forward, const Cfg cfg) {
  if (forward) forward_kernel<T, BF16U>(a, cfg); else backward_kernel<T, BF16U>(a, cfg);
  return 0;
}

template <bool BF16U, int K, int SKIP>
int run_fixed(const SruArgs& a, bool forward) {
  const bool mask = a.mask_c != nullptr;
  if (a.use_tanh) {
    return mask ? run<float, BF16U>(a, forward, Fixed<K, SKIP, true, true, false>())
                : run<float, BF16U>(a, forward, Fixed<K, SKIP, true, false, false>());
  }
  return mask ? run<float, BF16U>(a, forward, Fixed<K, SKIP, false, true, false>())
              : run<float, BF16U>(a, forward, Fixed<K, SKIP, false, false, false>());
}

// A bf16 U: float32 only, and Fixed loops for k = 3 alone (the fused training layer's one layout);
// other layouts share the Runtime loop, which keeps the lazy build short.
int dispatch(const SruArgs& a, bool forward, bool is_double, bool bf16_u = false) {
  const bool valid = (a.k == 3 && (a.skip_mode == 0 || a.skip_mode == 1)) ||
                     (a.k == 4 && (a.skip_mode == 0 || a.skip_mode == 2));
  if (!valid || (is_double && bf16_u)) return 1;  // Python validates before calling; never reached from sru.ops
  const Runtime cfg{a.k, static_cast<int>(a.skip_mode), a.use_tanh != 0, a.mask_c != nullptr,
                    a.per_step_weight != 0};
  if (bf16_u) {
    if (a.per_step_weight || a.k != 3) return run<float, true>(a, forward, cfg);
    return a.skip_mode == 0 ? run_fixed<true, 3, 0>(a, forward) : run_fixed<true, 3, 1>(a, forward);
  }
  if (is_double || a.per_step_weight)
    return is_double ? run<double, false>(a, forward, cfg) : run<float, false>(a, forward, cfg);
  if (a.k == 3) return a.skip_mode == 0 ? run_fixed<false, 3, 0>(a, forward) : run_fixed<false, 3, 1>(a, forward);
  return a.skip_mode == 0 ? run_fixed<false, 4, 0>(a, forward) : run_fixed<false, 4, 2>(a, forward);
}

}  // namespace

extern "C" {
int64_t sru_args_size() { return sizeof(SruArgs); }  // lets Python check the struct mirror
int sru_forward_f32(const SruArgs* a) { return dispatch(*a, true, false); }
int sru_forward_f64(const SruArgs* a) { return dispatch(*a, true, true); }
int sru_backward_f32(const SruArgs* a) { return dispatch(*a, false, false); }
int sru_backward_f64(const SruArgs* a) { return dispatch(*a, false, true); }
int sru_forward_f32_bf16u(const SruArgs* a) { return dispatch(*a, true, false, true); }
int sru_backward_f32_bf16u(const SruArgs* a) { return dispatch(*a, false, false, true); }
}
