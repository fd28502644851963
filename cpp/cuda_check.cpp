// The cluster documentation's first LibTorch program: is CUDA available, and a random tensor on
// the device. Prints values with 9 significant digits so Python can compare them exactly:
// at::manual_seed(s) then at::rand (torch::manual_seed and torch::rand are the same calls) gives
// the numbers Python's torch.manual_seed(s); torch.rand(2, 3) gives on the same device.
// ATen's header alone keeps the build faster than <torch/torch.h>.
//   usage: cuda_check [SEED]
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::stoull(argv[1]) : 0;
  const bool cuda = torch::cuda::is_available();
  std::cout << "cuda available: " << (cuda ? "true" : "false") << "\n";
  std::cout << "cuda devices: " << static_cast<int>(torch::cuda::device_count()) << "\n";
  const at::Device device = cuda ? at::kCUDA : at::kCPU;
  at::manual_seed(seed);
  auto t = at::rand({2, 3}, at::TensorOptions().device(device)).cpu();
  std::cout << "device: " << (cuda ? "cuda" : "cpu") << "\n";
  std::cout << "tensor:";
  for (int64_t i = 0; i < t.numel(); ++i) std::printf(" %.9g", t.data_ptr<float>()[i]);
  std::cout << std::endl;
  return 0;
}
