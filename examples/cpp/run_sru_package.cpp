// Run an AOTInductor package of an SRU model from C++, without Python (docs/deploy.md).
//
//   run_sru_package <model.pt2> <sru_op_library.so> <length> <batch> [out.bin]
//
// Loads the custom-op library first (the package calls sru_cpp::recurrence_forward, the fused
// CPU kernel; python -m sru.deploy op-library prints its path), then the package; feeds a
// deterministic input x[l][b][i] = sin(0.01 * (flat index)) of shape (length, batch, input_size),
// prints the output shapes and a few values, and writes h then c as raw float32 to out.bin
// (the test compares them with Python's eager outputs). Every bad argument and every error the
// package raises ends the program with one "error: ..." line and status 2.
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

namespace {

// The limits sru.deploy exports with (MAX_LENGTH, MAX_BATCH): larger sizes are outside the
// package's dynamic shapes.
constexpr int64_t kMaxLength = 1 << 16, kMaxBatch = 1 << 14;

int fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 2;
}

// A whole decimal number in [1, max]; false for "abc", "-3", "0", "5x" or an overflow.
bool parse_size(const char* text, int64_t max, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 1 || value > max) return false;
  *out = value;
  return true;
}

// The first line of a c10::Error without its C++ frames.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void print_values(const char* label, const torch::Tensor& row) {
  std::cout << label;
  for (int64_t i = 0; i < std::min<int64_t>(4, row.size(0)); ++i) std::cout << " " << row[i].item<float>();
  std::cout << "\n";
}

int run(const char* package, int64_t length, int64_t batch, const char* out_path) {
  torch::NoGradGuard no_grad;
  torch::inductor::AOTIModelPackageLoader loader(package);
  const std::string width = loader.get_metadata()["sru_input_size"];
  int64_t input_size = 0;
  if (!parse_size(width.c_str(), INT64_MAX, &input_size))
    return fail(std::string(package) + " has no sru_input_size in its metadata; compile it with "
                "sru.deploy.compile_package");
  torch::Tensor x = (torch::arange(length * batch * input_size, torch::kFloat32) * 0.01)
                        .sin()
                        .view({length, batch, input_size});
  std::vector<torch::Tensor> outputs = loader.run({x});
  const torch::Tensor h = outputs.at(0).contiguous(), c = outputs.at(1).contiguous();
  std::cout << "h " << h.sizes() << " c " << c.sizes() << "\n";
  print_values("h[0, 0, :4]", h[0][0]);
  print_values("c[-1, 0, :4]", c[-1][0]);
  if (out_path != nullptr) {
    FILE* out = std::fopen(out_path, "wb");
    if (out == nullptr) return fail(std::string("cannot write ") + out_path);
    std::fwrite(h.data_ptr<float>(), sizeof(float), h.numel(), out);
    std::fwrite(c.data_ptr<float>(), sizeof(float), c.numel(), out);
    std::fclose(out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6) {
    std::cerr << "usage: " << argv[0] << " <model.pt2> <sru_op_library.so> <length> <batch> "
                 "[out.bin]\n";
    return 2;
  }
  int64_t length = 0, batch = 0;
  if (!parse_size(argv[3], kMaxLength, &length))
    return fail(std::string("length: expected a whole number from 1 to ") + std::to_string(kMaxLength) +
                ", got '" + argv[3] + "'");
  if (!parse_size(argv[4], kMaxBatch, &batch))
    return fail(std::string("batch: expected a whole number from 1 to ") + std::to_string(kMaxBatch) +
                ", got '" + argv[4] + "'");
  if (!std::ifstream(argv[1]).good())
    return fail(std::string("cannot read the package ") + argv[1] +
                "; make one with sru.deploy.compile_package (docs/deploy.md)");
  // RTLD_GLOBAL: the library's static initialisers register the op with the dispatcher.
  if (dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr)
    return fail(std::string("cannot load the sru op library ") + argv[2] + ": " + dlerror());
  try {
    return run(argv[1], length, batch, argc > 5 ? argv[5] : nullptr);
  } catch (const c10::Error& err) {
    return fail(first_line(err.what_without_backtrace()));
  } catch (const std::exception& err) {
    return fail(first_line(err.what()));
  }
}
