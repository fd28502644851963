// Run an AOTInductor package (.pt2 from torch._inductor.aoti_compile_and_package) on a tensor
// file and write the output tensor file. With --repeat N it also times the call itself
// (--warmup untimed calls first) and prints "median_ms: X".
//   usage: aoti_run MODEL.pt2 INPUT OUTPUT [--warmup N] [--repeat N] [--threads N]
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>

#include <iostream>

#include "tensor_io.h"

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::cerr << "usage: aoti_run MODEL.pt2 INPUT OUTPUT [--warmup N] [--repeat N] [--threads N]\n";
    return 2;
  }
  const std::string model_path = argv[1], input_path = argv[2], output_path = argv[3];
  const auto opts = course::parse_options(argc, argv, 4);
  if (!std::ifstream(model_path))
    throw std::runtime_error("cannot open model file " + model_path + " (does it exist?)");
  auto input = course::read_tensor(input_path);

  torch::inductor::AOTIModelPackageLoader loader(model_path);
  auto metadata = loader.get_metadata();
  // course_utils.export stores the expected input shape; AOTInductor itself does not check it.
  if (metadata.count("course.input_shape"))
    course::check_shape(input, course::parse_shape(metadata["course.input_shape"]));
  // The package runs on the device it was compiled for: the inputs must be there too.
  const bool cuda = metadata.count("AOTI_DEVICE_KEY") && metadata["AOTI_DEVICE_KEY"] == "cuda";
  input = input.to(cuda ? at::kCUDA : at::kCPU);

  std::vector<at::Tensor> outputs;
  auto call = [&] { outputs = loader.run({input}); };
  call();
  course::write_tensor(output_path, outputs.at(0));
  std::cout << "device: " << (cuda ? "cuda" : "cpu") << "\n";
  std::cout << "input: " << course::shape_str(input.sizes()) << "\n";
  std::cout << "output: " << course::shape_str(outputs.at(0).sizes()) << "\n";
  if (opts.repeat > 0) {
    auto sync = [&] { if (cuda) torch::cuda::synchronize(); };
    std::cout << "median_ms: " << course::median_ms(call, sync, opts.warmup, opts.repeat) << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "aoti_run error: " << e.what() << "\n";
  return 1;
}
