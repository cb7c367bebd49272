// Run an AOTInductor package of an SRU model from C++, without Python (docs/deploy.md).
//
//   run_sru_package <model.pt2> <sru_op_library.so> <length> <batch> [out.bin]
//
// Loads the custom-op library first (the package calls sru_cpp::recurrence_forward, the fused
// CPU kernel; python -m sru.deploy op-library prints its path), then the package; feeds a
// deterministic input x[l][b][i] = sin(0.01 * (flat index)) of shape (length, batch, input_size),
// prints the output shapes and a few values, and writes h then c as raw float32 to out.bin
// (the test compares them with Python's eager outputs).
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: " << argv[0] << " <model.pt2> <sru_op_library.so> <length> <batch> "
                 "[out.bin]\n";
    return 2;
  }
  // RTLD_GLOBAL: the library's static initialisers register the op with the dispatcher.
  if (dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::cerr << "error: cannot load the sru op library " << argv[2] << ": " << dlerror()
              << "\n";
    return 2;
  }
  const int64_t length = std::atoll(argv[3]), batch = std::atoll(argv[4]);
  torch::NoGradGuard no_grad;
  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  const int64_t input_size = std::atoll(loader.get_metadata()["sru_input_size"].c_str());
  torch::Tensor x = (torch::arange(length * batch * input_size, torch::kFloat32) * 0.01)
                        .sin()
                        .view({length, batch, input_size});
  std::vector<torch::Tensor> outputs = loader.run({x});
  const torch::Tensor h = outputs.at(0).contiguous(), c = outputs.at(1).contiguous();
  std::cout << "h " << h.sizes() << " c " << c.sizes() << "\nh[0, 0, :4]";
  for (int64_t i = 0; i < std::min<int64_t>(4, h.size(2)); ++i) std::cout << " " << h[0][0][i].item<float>();
  std::cout << "\nc[-1, 0, :4]";
  for (int64_t i = 0; i < std::min<int64_t>(4, c.size(2)); ++i) std::cout << " " << c[-1][0][i].item<float>();
  std::cout << "\n";
  if (argc > 5) {
    FILE* out = std::fopen(argv[5], "wb");
    if (out == nullptr) {
      std::cerr << "error: cannot write " << argv[5] << "\n";
      return 2;
    }
    std::fwrite(h.data_ptr<float>(), sizeof(float), h.numel(), out);
    std::fwrite(c.data_ptr<float>(), sizeof(float), c.numel(), out);
    std::fclose(out);
  }
  return 0;
}
