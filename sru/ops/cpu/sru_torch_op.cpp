// The fused CPU forward recurrence as a PyTorch dispatcher op, sru_cpp::recurrence_forward, so
// that code without Python can call it: a torch.export graph compiled by AOTInductor (from Python
// or from C++, examples/cpp/), and TorchScript. Built with torch's headers by
// sru/ops/cpu/custom_op.py into its own library (the ctypes kernel library of build.py stays
// torch-free); a C++ program dlopen()s that library before loading a package that calls the op.
// Inference only: no autograd formula is registered (export detaches the inputs first).
// Shapes and layouts: sru/ops/reference.py; the kernel: sru_recurrence.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>
#include <optional>
#include <tuple>

#include "sru_args.h"

extern "C" int sru_forward_f32(const SruArgs* a);
extern "C" int sru_forward_f64(const SruArgs* a);

namespace {

const void* ptr_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? t->data_ptr() : nullptr;
}

std::optional<at::Tensor> contiguous_as(const std::optional<at::Tensor>& t, at::ScalarType dtype) {
  if (!t.has_value()) return std::nullopt;
  return t->to(dtype).contiguous();
}

// Returns (h (L, B, dirs*d), c_last (B, dirs*d)) in U's dtype; float16/bfloat16 compute in float32.
std::tuple<at::Tensor, at::Tensor> recurrence_forward(
    const at::Tensor& U, const std::optional<at::Tensor>& x, const at::Tensor& weight_c,
    const at::Tensor& bias, const std::optional<at::Tensor>& c0,
    const std::optional<at::Tensor>& mask_c, const std::optional<at::Tensor>& mask_pad,
    int64_t hidden_size, int64_t dirs, int64_t skip_mode, bool use_tanh, double scale_x) {
  TORCH_CHECK(U.dim() == 3, "sru_cpp::recurrence_forward expected U of shape (L, B, dirs*d*k)");
  TORCH_CHECK(U.device().is_cpu(), "sru_cpp::recurrence_forward runs on CPU tensors");
  const int64_t width = dirs * hidden_size;
  const at::ScalarType dtype = U.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor u = U.to(dtype).contiguous();
  auto x_c = skip_mode == 1 ? contiguous_as(x, dtype) : std::nullopt;
  at::Tensor wc = weight_c.to(dtype).contiguous(), b = bias.to(dtype).contiguous();
  auto c0_c = contiguous_as(c0, dtype), mask_c_c = contiguous_as(mask_c, dtype);
  std::optional<at::Tensor> pad;
  if (mask_pad.has_value()) pad = mask_pad->ne(0).to(at::kByte).contiguous();
  const int64_t length = u.size(0), batch = u.size(1);
  at::Tensor h = at::empty({length, batch, width}, u.options());
  at::Tensor c_last = at::empty({batch, width}, u.options());
  if (length == 0 || batch == 0) {  // nothing to run: c stays c0 (or zeros)
    c_last = c0_c.has_value() ? c0_c->clone() : at::zeros({batch, width}, u.options());
    return {h.to(U.scalar_type()), c_last.to(U.scalar_type())};
  }
  SruArgs a;
  std::memset(&a, 0, sizeof(a));
  a.U = u.data_ptr();
  a.x = x_c.has_value() ? x_c->data_ptr() : nullptr;
  a.weight_c = wc.data_ptr();
  a.bias = b.data_ptr();
  a.c0 = ptr_or_null(c0_c);
  a.mask_c = ptr_or_null(mask_c_c);
  a.mask_pad = pad.has_value() ? pad->data_ptr<uint8_t>() : nullptr;
  a.h = h.data_ptr();
  a.c_last = c_last.data_ptr();
  a.length = length;
  a.batch = batch;
  a.hidden = hidden_size;
  a.dirs = dirs;
  a.k = u.size(2) / width;
  a.per_step_weight = wc.dim() > 1;
  a.skip_mode = skip_mode;
  a.use_tanh = use_tanh;
  a.num_threads = at::get_num_threads();
  a.scale_x = scale_x;
  const int status = dtype == at::kDouble ? sru_forward_f64(&a) : sru_forward_f32(&a);
  TORCH_CHECK(status == 0, "sru_cpp::recurrence_forward: unsupported k=", a.k,
              " with skip_mode=", skip_mode);
  return {h.to(U.scalar_type()), c_last.to(U.scalar_type())};
}

}  // namespace

TORCH_LIBRARY(sru_cpp, m) {
  m.def("recurrence_forward(Tensor U, Tensor? x, Tensor weight_c, Tensor bias, Tensor? c0, "
        "Tensor? mask_c, Tensor? mask_pad, int hidden_size, int dirs, int skip_mode, "
        "bool use_tanh, float scale_x) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(sru_cpp, CPU, m) { m.impl("recurrence_forward", &recurrence_forward); }
