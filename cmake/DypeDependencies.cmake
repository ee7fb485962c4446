# Third-party dependencies, all from Debian 12 packages (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
# Infer request bodies are parsed with simdjson's On-Demand API (runtime/daemon/kserve/tensor_parse.cpp).
find_package(simdjson 3.0 REQUIRED CONFIG)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
# The daemon's HTTP transport: Boost.Beast and Asio (header-only; Debian's libboost-dev).
find_package(Boost 1.74 REQUIRED)
# Debian's dnnl-config.cmake insists on OpenCL, which the CPU engine does not need: find the
# CPU library directly and wrap it in the same target name.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
if(DYPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DYPE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# Optional accelerator toolchains: decide each backend once, here.
include(CheckLanguage)
function(dype_resolve_backend name found)
  if(DYPE_WITH_${name} STREQUAL "OFF")
    set(DYPE_HAVE_${name} OFF PARENT_SCOPE)
  elseif(${found})
    set(DYPE_HAVE_${name} ON PARENT_SCOPE)
  elseif(DYPE_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "DYPE_WITH_${name}=ON but its toolchain was not found")
  else()
    set(DYPE_HAVE_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

set(_cuda_found OFF)
if(NOT DYPE_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_cuda_found ON)
  endif()
endif()
dype_resolve_backend(CUDA _cuda_found)

find_program(DYPE_HIPCC hipcc)
set(_hip_found OFF)
if(DYPE_HIPCC AND NOT DYPE_WITH_HIP STREQUAL "OFF")
  # hipcc alone is not enough: the host side needs the runtime and rocSPARSE (Debian's
  # libamdhip64-dev and librocsparse-dev). ROCm SMI is loaded at run time (hw/hip/hip_smi.cpp).
  find_path(HIP_INCLUDE_DIR hip/hip_runtime_api.h PATHS /opt/rocm/include)
  find_path(ROCSPARSE_INCLUDE_DIR rocsparse/rocsparse.h PATHS /opt/rocm/include)
  find_library(AMDHIP64_LIBRARY amdhip64 PATHS /opt/rocm/lib)
  find_library(ROCSPARSE_LIBRARY rocsparse PATHS /opt/rocm/lib)
  if(HIP_INCLUDE_DIR AND ROCSPARSE_INCLUDE_DIR AND AMDHIP64_LIBRARY AND ROCSPARSE_LIBRARY)
    set(_hip_found ON)
  else()
    message(STATUS "hipcc found but HIP runtime/rocSPARSE headers or libraries missing "
                   "(libamdhip64-dev, librocsparse-dev)")
  endif()
endif()
dype_resolve_backend(HIP _hip_found)
# GPU targets of the HIP kernels (MI210/MI250 are gfx90a). Each extra target adds a device
# compile of every kernel file.
set(DYPE_HIP_ARCHS gfx90a CACHE STRING "AMD GPU targets for kernels/hip (--offload-arch), ;-separated")

# Debian's xrt.pc is broken: look for the headers and libraries directly.
find_path(XRT_INCLUDE_DIR xrt/xrt_device.h PATHS /usr/include/xrt /opt/xilinx/xrt/include)
find_library(XRT_COREUTIL_LIBRARY xrt_coreutil PATHS /usr/lib/x86_64-linux-gnu /opt/xilinx/xrt/lib)
set(_xrt_found OFF)
if(XRT_INCLUDE_DIR AND XRT_COREUTIL_LIBRARY)
  set(_xrt_found ON)
endif()
dype_resolve_backend(XRT _xrt_found)

message(STATUS "dype backends: cpu=ON emu=ON cuda=${DYPE_HAVE_CUDA} hip=${DYPE_HAVE_HIP} xrt=${DYPE_HAVE_XRT}")
