#pragma once
// Host-side planning shared by the GPU backends (kernels/cuda/launch_plan.h and
// kernels/hip/launch_plan.h build on it): the launch geometry type, the window attention band,
// what a failed runtime or library call means for the caller, and the message it carries. No
// toolkit headers and C++17, so it builds everywhere, hipcc included, and is tested without a GPU.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dype::kernels::gpu {

// The activation of a GEMM epilogue as the device kernels take it (common/op.h's Epilogue is
// C++20 and not in nvcc's/hipcc's view here).
enum class Activation : int { none = 0, relu = 1, gelu = 2 };

struct Grid {
  unsigned grid_x = 1, grid_y = 1;
  unsigned block = 1;
  std::size_t shared_bytes = 0;
};

// Sliding-window attention runs one block per (query row, head) over a band of 2 * (window / 2) + 1
// keys, clipped to seq_len.
struct WindowDims {
  std::int64_t seq_len = 0, heads = 1, head_dim = 0, window = 0;
};
std::int64_t window_band(std::int64_t seq_len, std::int64_t window);

// What a failed call means for the caller.
enum class ErrorClass {
  no_device,         // no driver, no GPU, driver too old, no kernel image: the backend is absent
  out_of_memory,     // allocation failed: DeviceError, the scheduler may retry elsewhere
  invalid_argument,  // a bad launch or call: InputError
  unsupported,       // the op/feature is not available on this device
  fatal,             // sticky device fault (illegal address, launch failure): device unusable
};

// "<device>: <call> failed: <name> (<code>): <text>" — the message every GPU failure carries.
std::string format_error(std::string_view device, std::string_view call, int code,
                         std::string_view name, std::string_view text);

}  // namespace dype::kernels::gpu
