// Small helpers shared by the course's C++ programs: the tensor file format, arguments, timing.
//
// Tensor file (written and read by course_utils/export.py too): one text header line
//     course-tensor float32 <ndim> <dim0> <dim1> ...
// followed by the values as raw little-endian float32 in C (row-major) order.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace course {

inline std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

inline at::Tensor read_tensor(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open input file " + path + " (does it exist?)");
  std::string header;
  std::getline(in, header);
  std::istringstream fields(header);
  std::string magic, dtype;
  int64_t ndim = -1;
  fields >> magic >> dtype >> ndim;
  if (magic != "course-tensor" || dtype != "float32" || ndim < 0)
    throw std::runtime_error(path + " is not a course tensor file (header '" + header +
                             "'); write it with course_utils.export.write_tensor");
  std::vector<int64_t> shape(ndim);
  for (auto& d : shape) fields >> d;
  if (!fields) throw std::runtime_error(path + ": header '" + header + "' lists too few sizes");
  auto tensor = at::empty(shape, at::kFloat);
  const auto bytes = static_cast<std::streamsize>(tensor.numel() * sizeof(float));
  in.read(reinterpret_cast<char*>(tensor.data_ptr<float>()), bytes);
  if (in.gcount() != bytes)
    throw std::runtime_error(path + ": shape " + shape_str(shape) + " needs " +
                             std::to_string(bytes) + " bytes of float32, the file has " +
                             std::to_string(in.gcount()));
  return tensor;
}

inline void write_tensor(const std::string& path, const at::Tensor& tensor) {
  auto t = tensor.to(at::kCPU, at::kFloat).contiguous();
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write output file " + path);
  out << "course-tensor float32 " << t.dim();
  for (auto d : t.sizes()) out << " " << d;
  out << "\n";
  out.write(reinterpret_cast<const char*>(t.data_ptr<float>()),
            static_cast<std::streamsize>(t.numel() * sizeof(float)));
}

// "-1,3,32,32" -> {-1, 3, 32, 32}; -1 marks a dynamic size (the batch).
inline std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) shape.push_back(std::stoll(item));
  return shape;
}

// Throws a clear error when `input` does not fit `expected` (-1 matches any size).
inline void check_shape(const at::Tensor& input, const std::vector<int64_t>& expected) {
  bool ok = input.dim() == static_cast<int64_t>(expected.size());
  for (int64_t i = 0; ok && i < input.dim(); ++i)
    ok = expected[i] == -1 || expected[i] == input.size(i);
  if (!ok)
    throw std::runtime_error("input shape " + shape_str(input.sizes()) +
                             " does not match the model's input shape " + shape_str(expected) +
                             " (-1: any size)");
}

// Median wall time of `fn` in milliseconds, after `warmup` untimed calls. `sync` waits for
// queued device work (CUDA runs asynchronously), so each timed call is complete.
inline double median_ms(const std::function<void()>& fn, const std::function<void()>& sync,
                        int warmup, int repeat) {
  for (int i = 0; i < warmup; ++i) fn();
  sync();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    sync();
    times.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Options after the positional arguments: --warmup N --repeat N --device NAME --threads N
struct Options {
  int warmup = 0;
  int repeat = 0;
  int threads = 0;  // 0: LibTorch's default (OMP_NUM_THREADS, else one per core)
  std::string device;
};

inline Options parse_options(int argc, char** argv, int first) {
  Options opts;
  for (int i = first; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("option " + key + " needs a value");
    std::string value = argv[++i];
    if (key == "--warmup") opts.warmup = std::stoi(value);
    else if (key == "--repeat") opts.repeat = std::stoi(value);
    else if (key == "--device") opts.device = value;
    else if (key == "--threads") opts.threads = std::stoi(value);
    else throw std::runtime_error("unknown option " + key +
                                  " (use --warmup, --repeat, --device, --threads)");
  }
  // Sets OpenMP's thread count too, which AOTInductor's CPU kernels use.
  if (opts.threads > 0) at::set_num_threads(opts.threads);
  return opts;
}

}  // namespace course
