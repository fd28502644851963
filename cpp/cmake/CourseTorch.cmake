# CourseTorch.cmake: build a CMake project against the LibTorch inside the course's PyTorch wheel.
# One line in your CMakeLists.txt, BEFORE find_package(Torch):
#     include(CourseTorch)
# and configure with `course cpp build SRC BUILD` (it passes the two paths below), or by hand:
#     cmake -S SRC -B BUILD -DCMAKE_MODULE_PATH=<course>/cpp/cmake \
#           -DCMAKE_PREFIX_PATH="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# It does three things (lesson 07):
# 1. A CUDA wheel's LibTorch looks for a full CUDA toolkit at configure time and fails without one
#    ("Your installed Caffe2 version uses CUDA but I cannot find the CUDA libraries"). Programs
#    that call no CUDA API themselves do not need it: libtorch_cuda.so and the wheel's nvidia
#    libraries bring CUDA at run time. Caffe2's cuda.cmake returns early when torch::cudart
#    exists, so empty targets let the configure pass; a GPU is still used where there is one.
#    With your own CUDA kernels, configure with -DCOURSE_USE_CUDA_TOOLKIT=ON.
# 2. LibTorch 2.14's headers require C++20 ("#error C++20 or later compatible compiler is
#    required"): every target that links torch gets at least C++20, even one that sets
#    CXX_STANDARD 14 (a compile feature of the torch target; CMake takes the higher standard).
# 3. Programs find LibTorch's shared libraries at run time, also after `cmake --install`
#    (rpath from the link paths), with no -Wl,-rpath by hand.
cmake_minimum_required(VERSION 3.19)  # cmake_language(DEFER)

option(COURSE_USE_CUDA_TOOLKIT "Let LibTorch find a real CUDA toolkit (nvcc)" OFF)
if(NOT COURSE_USE_CUDA_TOOLKIT)
  foreach(_course_lib cudart nvtoolsext cufft curand cublas cudnn nvrtc)
    if(NOT TARGET torch::${_course_lib})
      add_library(torch::${_course_lib} INTERFACE IMPORTED)
    endif()
  endforeach()
endif()

if(NOT DEFINED CMAKE_CXX_STANDARD OR CMAKE_CXX_STANDARD LESS 20)
  set(CMAKE_CXX_STANDARD 20)
endif()
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

# find_package(Torch) comes after this file: at the end of the directory, give LibTorch's target
# the C++20 requirement, which every target linking it inherits.
function(_course_torch_requires_cxx20)
  if(TARGET torch)
    set_property(TARGET torch APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)
  else()
    message(WARNING "CourseTorch: no torch target; call find_package(Torch REQUIRED) after include(CourseTorch)")
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _course_torch_requires_cxx20)
