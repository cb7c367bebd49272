// The argument structs of the fused CPU kernels, shared by sru_recurrence.cpp (one layer's
// recurrence) and sru_stack.cpp (a whole inference stack in one call).
#pragma once
#include <cstdint>

// Keep every field 8 bytes wide: the ctypes mirror in kernel.py must match this layout.
struct SruArgs {
  const void* U;            // (L, B, dirs*d*k)
  const void* x;            // (L, B, dirs*d) or null (used only when skip_mode == 1)
  const void* weight_c;     // (2*dirs*d) or (L, B, dirs*d*2) when per_step_weight
  const void* bias;         // (2*dirs*d)
  const void* c0;           // (B, dirs*d) or null (zeros)
  const void* mask_c;       // (B, dirs*d) or null
  const uint8_t* mask_pad;  // (L, B), nonzero = padded step, or null
  void* h;                  // out (L, B, dirs*d)
  void* c_all;              // forward: out, backward: in (L, B, dirs*d); forward may be null
  void* c_last;             // out (B, dirs*d)
  const void* grad_h;       // (L, B, dirs*d)
  const void* grad_c_last;  // (B, dirs*d) or null (zeros)
  void* grad_U;             // out (L, B, dirs*d*k)
  void* grad_x;             // out (L, B, dirs*d) when skip_mode == 1
  void* grad_weight_c;      // out: same shape as weight_c
  void* grad_bias;          // out (2*dirs*d)
  void* grad_partial;       // scratch (B, 4, dirs*d): per-row sums of gb_f, gb_r, gv_f, gv_r
  void* grad_c0;            // out (B, dirs*d)
  void* grad_mask_c;        // out (B, dirs*d), or null when mask_c needs no gradient
  // Packed layout (a PackedSequence's data, time-major, lengths sorted in decreasing order), or
  // both null for the dense (L, B, .) layout. Step t's rows are step_offsets[t] ..
  // step_offsets[t] + batch_sizes[t]: every (L, B, .) tensor above is then (N, .), N = the sum of
  // batch_sizes, and B = batch_sizes[0]. mask_pad is null with a packed layout.
  const int64_t* batch_sizes;   // (L), non-increasing
  const int64_t* step_offsets;  // (L + 1), step_offsets[0] = 0
  int64_t length, batch, hidden, dirs, k;
  int64_t per_step_weight;  // bool
  int64_t skip_mode;        // 0: no skip term, 1: x * scale_x (k == 3), 2: u3 (k == 4)
  int64_t use_tanh;         // bool
  int64_t num_threads;
  double scale_x;
};

// One layer of an inference stack (sru_stack.cpp); mirrored by StackLayer in stack.py.
struct StackLayer {
  const void* weight;    // (in_features, dirs*d*k), row-major: U = x @ weight
  const void* weight_c;  // (2*dirs*d)
  const void* bias;      // (2*dirs*d)
  int64_t in_features, hidden, dirs, k, skip_mode, use_tanh;
  double scale_x;
};

// A whole stack at once; mirrored by StackArgs in stack.py.
struct StackArgs {
  const void* x;            // (L, B, layers[0].in_features)
  const void* c0;           // (layers, B, dirs*d) or null (zeros)
  const uint8_t* mask_pad;  // (L, B) or null
  void* h;                  // out (L, B, dirs*d)
  void* c_last;             // out (layers, B, dirs*d)
  void* workspace;          // L*B*(max dirs*d*k + dirs*d) elements: U, one intermediate h
  const StackLayer* layers;
  int64_t num_layers, length, batch, num_threads;
};

// One layer of SRU++'s decoding step (srupp_step.cpp); mirrored by SruppLayer in srupp_step.py. Weights are
// nn.Linear's (out, in), row-major; a layer norm is its weight and bias (both null: none) and its eps.
struct SruppLayer {
  const void* w1;          // (proj, in): z = x w1^T
  const void* w_kv;        // (2 proj, proj): [k ; v] = zq w_kv^T; null: a layer without attention
  const void* w_u;         // (dirs*d*k, proj): U = o w_u^T
  const void* alpha;       // (1): the attention's ReZero scale; null without attention
  const void* weight_c;    // (2*dirs*d)
  const void* bias;        // (2*dirs*d)
  const void* norm_w[4];   // the layer norms: the cell's on its input, on z (before keys/values or
  const void* norm_b[4];   // before w_u), the attention's after its residual, the cell's on h
  void* keys;              // per call: the first cached key row (positions rows, batch*proj apart), the
  void* values;            // last row is the step's own, written here; the same for values
  int64_t in_features, proj, heads, positions, hidden, dirs, k, skip_mode, use_tanh;
  double scale_x;
  double eps[4];
};

// One decoding step (L = 1) of a whole SRU++ stack; mirrored by SruppStepArgs in srupp_step.py.
struct SruppStepArgs {
  const void* x;           // (B, input_size)
  const void* w_in;        // (layers[0].in_features, input_size): input_to_hidden, or null
  const void* c0;          // (layers, B, dirs*d)
  void* h;                 // out (B, dirs*d)
  void* c_last;            // out (layers, B, dirs*d)
  void* workspace;         // B * per_row floats (srupp_step.py: SruppStepPlan.per_row)
  const SruppLayer* layers;
  const void* attention;   // sru_decode_attention (decode_attention.cpp, the decoding library)
  int64_t num_layers, batch, input_size, num_threads;
};

// One stack layer's recurrence arguments (StackLayer and SruppLayer share these fields): the stack
// (sru_stack.cpp) and the SRU++ step (srupp_step.cpp) fill them alike.
template <class Layer>
SruArgs layer_recurrence_args(const Layer& l, const void* U, const void* in, const void* c0,
                              const uint8_t* mask_pad, void* h, void* c_last, int64_t length,
                              int64_t batch, int64_t num_threads) {
  SruArgs r{};
  r.U = U;
  r.x = l.skip_mode == 1 ? in : nullptr;
  r.weight_c = l.weight_c;
  r.bias = l.bias;
  r.c0 = c0;
  r.mask_pad = mask_pad;
  r.h = h;
  r.c_last = c_last;
  r.length = length;
  r.batch = batch;
  r.hidden = l.hidden;
  r.dirs = l.dirs;
  r.k = l.k;
  r.skip_mode = l.skip_mode;
  r.use_tanh = l.use_tanh;
  r.num_threads = num_threads;
  r.scale_x = l.scale_x;
  return r;
}
