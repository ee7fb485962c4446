// Opening a client's GPU IPC handle (the CUDA shared-memory extension): the runtime chosen for it,
// and the errors that name the field at fault, for CUDA and for HIP. Hosts without a GPU run these
// as they are (no device: device_id is named); opening a real handle and reading through it is
// run by the GPU check's CUDA shared-memory client.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "hw/device_ipc_memory.h"

namespace dype::hw {
namespace {

// The field an InputError names, or "" when `f` throws none.
template <class F>
std::string field_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const InputError& e) {
    if (message) *message = e.what();
    return e.where();
  }
  return "";
}

TEST(DeviceIpcMemory, TheRuntimeWithDevicesOpensTheHandle) {
  const int cuda = cuda_ipc_device_count(), hip = hip_ipc_device_count();
  const std::string_view chosen = gpu_ipc_backend();
  if (cuda > 0) {
    EXPECT_EQ(chosen, "cuda");
  } else if (hip > 0) {
    EXPECT_EQ(chosen, "hip") << "HIP sees devices and CUDA none";
  } else if (cuda >= 0) {
    EXPECT_EQ(chosen, "cuda") << "no devices: the first runtime built answers";
  } else if (hip >= 0) {
    EXPECT_EQ(chosen, "hip");
  } else {
    EXPECT_EQ(chosen, "");
    EXPECT_FALSE(gpu_ipc_built());
    EXPECT_THROW(open_device_ipc_memory(std::string(kGpuIpcHandleBytes, '\0'), 0, 64), Error);
    return;
  }
  EXPECT_TRUE(gpu_ipc_built());
}

TEST(DeviceIpcMemory, AHandleOfTheWrongSizeIsRefusedNamingRawHandle) {
  if (!gpu_ipc_built()) GTEST_SKIP() << "built without CUDA or HIP";
  std::string message;
  EXPECT_EQ(field_of([] { open_device_ipc_memory(std::string(63, 'a'), 0, 64); }, &message), "raw_handle");
  EXPECT_NE(message.find("63 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("IpcMemHandle_t has 64"), std::string::npos) << message;
}

void expect_runtime_errors(int devices, std::string_view vendor,
                           const std::function<void(std::string_view, int)>& open) {
  std::string message;
  EXPECT_EQ(field_of([&] { open(std::string(7, 'x'), 0); }, &message), "raw_handle") << message;
  EXPECT_NE(message.find(std::string(vendor == "HIP" ? "hipIpcMemHandle_t" : "cudaIpcMemHandle_t")),
            std::string::npos)
      << message;
  // A device index past the runtime's devices (or any, on a host with none) names device_id.
  EXPECT_EQ(field_of([&] { open(std::string(kGpuIpcHandleBytes, '\0'), devices); }, &message), "device_id");
  EXPECT_NE(message.find(std::to_string(devices) + " is not a " + std::string(vendor) + " device of this host (" +
                         std::to_string(devices) + " found)"),
            std::string::npos)
      << message;
  EXPECT_EQ(field_of([&] { open(std::string(kGpuIpcHandleBytes, '\0'), -1); }, &message), "device_id");
}

TEST(DeviceIpcMemory, CudaNamesTheFieldAtFault) {
  const int devices = cuda_ipc_device_count();
  if (devices < 0) GTEST_SKIP() << "built without CUDA";
  expect_runtime_errors(devices, "CUDA", [](std::string_view h, int d) { open_cuda_ipc_memory(h, d, 64); });
}

TEST(DeviceIpcMemory, HipNamesTheFieldAtFault) {
  const int devices = hip_ipc_device_count();
  if (devices < 0) GTEST_SKIP() << "built without HIP";
  expect_runtime_errors(devices, "HIP", [](std::string_view h, int d) { open_hip_ipc_memory(h, d, 64); });
}

}  // namespace
}  // namespace dype::hw
