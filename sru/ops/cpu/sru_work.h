// How the fused recurrence (sru_recurrence.cpp) cuts one call into tasks and where each step's rows
// are: the work split (docs/ops.md, "Loop order") and the dense / packed row layout (sru_args.h).
// Kept apart from the kernel body so that each file reads as one thing.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sru_args.h"

namespace sru_work {

// Split hidden units into chunks so that there are at least `per_thread` tasks per thread, while
// each chunk stays long enough (>= 64) for the vector loop to pay off.
inline int64_t pick_chunk(int64_t rows, int64_t d, int64_t threads, int64_t per_thread = 4) {
  int64_t nchunks = 1;
  while (rows * nchunks < per_thread * threads && d / (2 * nchunks) >= 64) nchunks *= 2;
  int64_t chunk = (d + nchunks - 1) / nchunks;
  return (chunk + 15) / 16 * 16;
}

// Whether a task walks a group of batch rows per step: not for a single step (nothing to walk;
// the group's larger state buffer measured slower at L = 1, B = 32) nor for bidirectional layers
// (grouped, their forward measured slower: each row's other half belongs to the other
// direction's task; docs/ops.md, "Loop order").
inline bool grouped_walk(int64_t length, int64_t dirs) { return length >= 2 && dirs == 1; }

// Batch rows per grouped task: up to 64K states (256 KB of float, about L2), and with several
// threads one contiguous block of rows per thread. Right after the matmul that wrote U, the
// forward measured faster at 2 threads than with 4 smaller blocks per thread, and the backward
// faster than with one row per task (docs/ops.md, "Loop order"): each step
// then reads one long run of adjacent rows.
inline int64_t pick_group(int64_t batch, int64_t chunks, int64_t threads, int64_t chunk) {
  const int64_t group = std::min(batch, 65536 / std::max<int64_t>(chunk, 1));
  const int64_t want_groups = (threads + chunks - 1) / chunks;
  return std::max<int64_t>(1, std::min(group, (batch + want_groups - 1) / want_groups));  // >= 1 for B = 0
}

// How one call (forward or backward) is cut into tasks of (a block of batch rows, direction,
// a chunk of units). Grouped walks split the units only when there are fewer rows than threads.
struct Split {
  int64_t chunk, nchunks, group, ntasks;
};

inline Split split_work(int64_t length, int64_t batch, int64_t d, int64_t dirs, int64_t threads) {
  const bool grouped = grouped_walk(length, dirs);
  const int64_t chunk = grouped ? pick_chunk(batch, d, threads, 1) : pick_chunk(batch * dirs, d, threads);
  const int64_t nchunks = (d + chunk - 1) / chunk;
  const int64_t group = grouped ? pick_group(batch, nchunks, threads, chunk) : 1;
  const int64_t ngroups = (batch + group - 1) / group;
  return {chunk, nchunks, group, ngroups * dirs * nchunks};
}

// Like torch's grain size: below ~32K elements, waking threads costs more than it saves.
inline bool worth_threads(int64_t threads, int64_t ntasks, int64_t elements) {
  return threads > 1 && ntasks > 1 && elements >= 32768;
}

// Where step t's rows are: dense (L, B, .) tensors, or the packed layout of a PackedSequence
// (sru_args.h): step t has only its first batch_sizes[t] rows, starting at row step_offsets[t].
// A packed row that is absent at step t is simply skipped (nothing read or written), which is
// what makes the packed layout cheaper than padding: no padded step is computed at all.
struct Layout {
  const int64_t* sizes;
  const int64_t* offsets;
  int64_t L, B;
  int64_t start(int64_t t) const { return offsets ? offsets[t] : t * B; }
  bool present(int64_t t, int64_t b) const { return !sizes || b < sizes[t]; }
  // Whether (t, b) is the first step of its direction: s == 0, or (packed, backward direction)
  // the row's last real token, so that each sequence's backward pass starts there with c0.
  bool first(int64_t s, int64_t t_prev, int64_t b) const { return s == 0 || !present(t_prev, b); }
  int64_t length(int64_t b) const {  // steps of row b: L when dense
    if (!sizes) return L;
    int64_t n = 0;
    while (n < L && b < sizes[n]) ++n;
    return n;
  }
};

inline Layout layout_of(const SruArgs& a) { return {a.batch_sizes, a.step_offsets, a.length, a.batch}; }

}  // namespace sru_work
