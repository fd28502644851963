// Legacy route: run a TorchScript file (torch.jit.trace / torch.jit.script, then .save) on a
// tensor file and write the output tensor file. TorchScript is deprecated in favour of
// torch.export + AOTInductor (aoti_run.cpp); this loader is for models you already have.
//   usage: ts_run MODEL.pt INPUT OUTPUT [--device cpu|cuda] [--warmup N] [--repeat N] [--threads N]
#include <torch/cuda.h>
#include <torch/script.h>

#include <iostream>

#include "tensor_io.h"

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::cerr << "usage: ts_run MODEL.pt INPUT OUTPUT [--device cpu|cuda] [--warmup N] "
                 "[--repeat N] [--threads N]\n";
    return 2;
  }
  const std::string model_path = argv[1], input_path = argv[2], output_path = argv[3];
  const auto opts = course::parse_options(argc, argv, 4);
  const torch::Device device(opts.device.empty() ? "cpu" : opts.device);
  if (!std::ifstream(model_path))
    throw std::runtime_error("cannot open model file " + model_path + " (does it exist?)");
  auto input = course::read_tensor(input_path);

  // course_utils.export saves the expected input shape as an extra file beside the model.
  torch::jit::ExtraFilesMap extra{{"course.input_shape", ""}};
  auto module = torch::jit::load(model_path, device, extra);
  module.eval();
  if (!extra["course.input_shape"].empty())
    course::check_shape(input, course::parse_shape(extra["course.input_shape"]));
  input = input.to(device);

  torch::NoGradGuard no_grad;
  at::Tensor output;
  auto call = [&] { output = module.forward({input}).toTensor(); };
  call();
  course::write_tensor(output_path, output);
  std::cout << "device: " << device << "\n";
  std::cout << "input: " << course::shape_str(input.sizes()) << "\n";
  std::cout << "output: " << course::shape_str(output.sizes()) << "\n";
  if (opts.repeat > 0) {
    auto sync = [&] { if (device.is_cuda()) torch::cuda::synchronize(); };
    std::cout << "median_ms: " << course::median_ms(call, sync, opts.warmup, opts.repeat) << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "ts_run error: " << e.what() << "\n";
  return 1;
}
