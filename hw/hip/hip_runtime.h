#pragma once
// The HIP runtime as GpuDevice<Api> (hw/gpu/gpu_device.h) sees it: the vendor header that maps
// the runtime's types and calls, and the call names error messages use (hw/cuda/cuda_runtime.h is
// the same map for CUDA).
#include <cstddef>
#include <string>
#include <string_view>

#include <hip/hip_runtime_api.h>

#include "hw/hip/hip_smi.h"

namespace dype::hw {

// Throws (DeviceError / InputError per kernels::hip::classify_hip_error) when rc != hipSuccess.
void hip_check(const std::string& device, std::string_view call, hipError_t rc);

struct HipRuntime {
  using Error = hipError_t;
  using Stream = hipStream_t;
  using Event = hipEvent_t;
  using PowerMeter = RocmSmi;
  static constexpr Error kSuccess = hipSuccess;
  static constexpr const char* kBackend = "hip";
  static constexpr const char* kVendor = "HIP";  // as messages name the runtime
  static constexpr const char* kMeterName = "ROCm SMI";
  static constexpr const char* kSetDevice = "hipSetDevice";
  static constexpr const char* kMalloc = "hipMalloc";
  static constexpr const char* kMallocHost = "hipHostMalloc";
  static constexpr const char* kStreamCreate = "hipStreamCreateWithFlags";
  static constexpr const char* kEventCreate = "hipEventCreate";
  static constexpr const char* kEventRecord = "hipEventRecord";
  static constexpr const char* kEventSynchronize = "hipEventSynchronize";
  static constexpr const char* kEventElapsedTime = "hipEventElapsedTime";
  static constexpr const char* kStreamSynchronize = "hipStreamSynchronize";
  static constexpr const char* kDeviceGetAttribute = "hipDeviceGetAttribute(MaxSharedMemoryPerBlock)";
  static constexpr const char* kMemcpyH2D = "hipMemcpyAsync(H2D)";
  static constexpr const char* kMemcpyD2H = "hipMemcpyAsync(D2H)";
  static constexpr const char* kMemcpyD2D = "hipMemcpyAsync(D2D)";
  static constexpr const char* kMemcpyPeer = "hipMemcpyPeerAsync";
  static constexpr const char* kEnablePeerAccess = "hipDeviceEnablePeerAccess";

  static void check(const std::string& device, std::string_view call, Error rc) { hip_check(device, call, rc); }
  static Error set_device(int ordinal) { return hipSetDevice(ordinal); }
  static Error get_last_error() { return hipGetLastError(); }
  static Error malloc(void** p, std::size_t bytes) { return hipMalloc(p, bytes); }
  static Error free(void* p) { return hipFree(p); }
  static Error malloc_host(void** p, std::size_t bytes) { return hipHostMalloc(p, bytes, hipHostMallocDefault); }
  static Error free_host(void* p) { return hipHostFree(p); }
  static Error stream_create(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
  static Error stream_destroy(Stream s) { return hipStreamDestroy(s); }
  static Error stream_synchronize(Stream s) { return hipStreamSynchronize(s); }
  static Error event_create(Event* e) { return hipEventCreate(e); }
  static Error event_create_untimed(Event* e) { return hipEventCreateWithFlags(e, hipEventDisableTiming); }
  static Error event_destroy(Event e) { return hipEventDestroy(e); }
  static Error event_record(Event e, Stream s) { return hipEventRecord(e, s); }
  static Error event_synchronize(Event e) { return hipEventSynchronize(e); }
  static Error event_elapsed_ms(float* ms, Event a, Event b) { return hipEventElapsedTime(ms, a, b); }
  static Error max_shared_memory_per_block(int* v, int ordinal) {
    return hipDeviceGetAttribute(v, hipDeviceAttributeMaxSharedMemoryPerBlock, ordinal);
  }
  // Copy engines that run beside kernels (0: copies and kernels do not overlap).
  static Error async_engine_count(int* v, int ordinal) {
    return hipDeviceGetAttribute(v, hipDeviceAttributeAsyncEngineCount, ordinal);
  }
  static Error pci_bus_id(char* out, int len, int ordinal) { return hipDeviceGetPCIBusId(out, len, ordinal); }
  static Error memcpy_h2d_async(void* d, const void* h, std::size_t n, Stream s) {
    return hipMemcpyAsync(d, h, n, hipMemcpyHostToDevice, s);
  }
  static Error memcpy_d2h_async(void* h, const void* d, std::size_t n, Stream s) {
    return hipMemcpyAsync(h, d, n, hipMemcpyDeviceToHost, s);
  }
  static Error memcpy_d2d_async(void* d, const void* s_, std::size_t n, Stream s) {
    return hipMemcpyAsync(d, s_, n, hipMemcpyDeviceToDevice, s);
  }
  static Error memcpy_peer_async(void* d, int d_dev, const void* s_, int s_dev, std::size_t n, Stream s) {
    return hipMemcpyPeerAsync(d, d_dev, s_, s_dev, n, s);
  }
  static Error can_access_peer(int* can, int a, int b) { return hipDeviceCanAccessPeer(can, a, b); }
  static Error enable_peer_access(int peer) { return hipDeviceEnablePeerAccess(peer, 0); }
  static bool peer_access_already_enabled(Error rc) { return rc == hipErrorPeerAccessAlreadyEnabled; }
  static constexpr const char* kHostRegister = "hipHostRegister";
  // Portable: pinned for every device, not only the current one.
  static Error host_register(void* p, std::size_t n) {
    return hipHostRegister(p, n, hipHostRegisterPortable);
  }
  static Error host_unregister(void* p) { return hipHostUnregister(p); }
  // IPC memory another process shared (hw/gpu/gpu_ipc_memory.h).
  using IpcHandle = hipIpcMemHandle_t;
  static constexpr const char* kIpcHandle = "hipIpcMemHandle_t";
  static constexpr const char* kIpcOpen = "hipIpcOpenMemHandle";
  static constexpr const char* kIpcGetHandle = "hipIpcGetMemHandle";
  static constexpr const char* kMemset = "hipMemsetAsync";
  static constexpr const char* kMemcpyD2HSync = "hipMemcpy(D2H)";
  static constexpr const char* kMemcpyH2DSync = "hipMemcpy(H2D)";
  static Error device_count(int* n) { return hipGetDeviceCount(n); }
  static Error ipc_open(void** p, IpcHandle h) { return hipIpcOpenMemHandle(p, h, hipIpcMemLazyEnablePeerAccess); }
  static Error ipc_close(void* p) { return hipIpcCloseMemHandle(p); }
  static Error ipc_get_handle(IpcHandle* h, void* p) { return hipIpcGetMemHandle(h, p); }
  static Error memset_async(void* p, int v, std::size_t n, Stream s) { return hipMemsetAsync(p, v, n, s); }
  static Error memcpy_d2h(void* h, const void* d, std::size_t n) { return hipMemcpy(h, d, n, hipMemcpyDeviceToHost); }
  static Error memcpy_h2d(void* d, const void* h, std::size_t n) { return hipMemcpy(d, h, n, hipMemcpyHostToDevice); }
  // Sets *flag when any of the n floats at x is NaN or Inf (kernels/hip/kernels.h).
  static Error flag_non_finite(const float* x, std::size_t n, unsigned int* flag, Stream s);
  static const char* error_string(Error rc) { return hipGetErrorString(rc); }
};

}  // namespace dype::hw
