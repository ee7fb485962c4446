# Every build switch of the project, with its default. Optional backends take AUTO|ON|OFF:
# AUTO builds the backend when its toolchain is found, ON fails the configure step without it.
option(DYPE_BUILD_TESTS "Build the unit, integration and end-to-end tests" ON)
option(DYPE_BUILD_BENCH "Build the benchmarks in bench/" ON)
option(DYPE_WERROR "Treat compiler warnings as errors (CI sets this)" OFF)
set(DYPE_SANITIZE "" CACHE STRING "Sanitizers to build with: '', 'address,undefined' or 'thread'")

set(DYPE_WITH_CUDA AUTO CACHE STRING "CUDA backend (hw/cuda, kernels/cuda): AUTO|ON|OFF")
set(DYPE_WITH_HIP AUTO CACHE STRING "HIP/ROCm backend (hw/hip, kernels/hip): AUTO|ON|OFF")
set(DYPE_WITH_XRT AUTO CACHE STRING "Xilinx XRT backend (hw/xrt, kernels/xrt): AUTO|ON|OFF")
foreach(backend CUDA HIP XRT)
  set_property(CACHE DYPE_WITH_${backend} PROPERTY STRINGS AUTO ON OFF)
  if(NOT DYPE_WITH_${backend} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DYPE_WITH_${backend} must be AUTO, ON or OFF, not '${DYPE_WITH_${backend}}'")
  endif()
endforeach()

set(DYPE_WARNINGS -Wall -Wextra)
# GCC 12 at -O3 reports -Wrestrict inside libstdc++'s std::string concatenation, a known false
# positive (GCC bug 105329); it is not about our code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND DYPE_WARNINGS -Wno-restrict)
endif()
if(DYPE_WERROR)
  list(APPEND DYPE_WARNINGS -Werror)
endif()

if(DYPE_SANITIZE)
  add_compile_options(-fsanitize=${DYPE_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${DYPE_SANITIZE})
endif()
