#pragma once
// The CUDA runtime as GpuDevice<Api> (hw/gpu/gpu_device.h) sees it: the vendor header that maps
// the runtime's types and calls, and the call names error messages use. hw/hip/hip_runtime.h is
// the same map for HIP.
#include <cstddef>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "hw/cuda/cuda_nvml.h"

namespace dype::hw {

// Throws (DeviceError / InputError per kernels::cuda::classify_cuda_error) when rc != cudaSuccess.
void cuda_check(const std::string& device, std::string_view call, cudaError_t rc);

struct CudaRuntime {
  using Error = cudaError_t;
  using Stream = cudaStream_t;
  using Event = cudaEvent_t;
  using PowerMeter = Nvml;
  static constexpr Error kSuccess = cudaSuccess;
  static constexpr const char* kBackend = "cuda";
  static constexpr const char* kVendor = "CUDA";  // as messages name the runtime
  static constexpr const char* kMeterName = "NVML";
  static constexpr const char* kSetDevice = "cudaSetDevice";
  static constexpr const char* kMalloc = "cudaMalloc";
  static constexpr const char* kMallocHost = "cudaMallocHost";
  static constexpr const char* kStreamCreate = "cudaStreamCreateWithFlags";
  static constexpr const char* kEventCreate = "cudaEventCreate";
  static constexpr const char* kEventRecord = "cudaEventRecord";
  static constexpr const char* kEventSynchronize = "cudaEventSynchronize";
  static constexpr const char* kEventElapsedTime = "cudaEventElapsedTime";
  static constexpr const char* kStreamSynchronize = "cudaStreamSynchronize";
  static constexpr const char* kDeviceGetAttribute = "cudaDeviceGetAttribute(MaxSharedMemoryPerBlock)";
  static constexpr const char* kMemcpyH2D = "cudaMemcpyAsync(H2D)";
  static constexpr const char* kMemcpyD2H = "cudaMemcpyAsync(D2H)";
  static constexpr const char* kMemcpyD2D = "cudaMemcpyAsync(D2D)";
  static constexpr const char* kMemcpyPeer = "cudaMemcpyPeerAsync";
  static constexpr const char* kEnablePeerAccess = "cudaDeviceEnablePeerAccess";

  static void check(const std::string& device, std::string_view call, Error rc) { cuda_check(device, call, rc); }
  static Error set_device(int ordinal) { return cudaSetDevice(ordinal); }
  static Error get_last_error() { return cudaGetLastError(); }
  static Error malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
  static Error free(void* p) { return cudaFree(p); }
  static Error malloc_host(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
  static Error free_host(void* p) { return cudaFreeHost(p); }
  static Error stream_create(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
  static Error stream_destroy(Stream s) { return cudaStreamDestroy(s); }
  static Error stream_synchronize(Stream s) { return cudaStreamSynchronize(s); }
  static Error event_create(Event* e) { return cudaEventCreate(e); }
  static Error event_create_untimed(Event* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
  static Error event_destroy(Event e) { return cudaEventDestroy(e); }
  static Error event_record(Event e, Stream s) { return cudaEventRecord(e, s); }
  static Error event_synchronize(Event e) { return cudaEventSynchronize(e); }
  static Error event_elapsed_ms(float* ms, Event a, Event b) { return cudaEventElapsedTime(ms, a, b); }
  static Error max_shared_memory_per_block(int* v, int ordinal) {
    return cudaDeviceGetAttribute(v, cudaDevAttrMaxSharedMemoryPerBlock, ordinal);
  }
  // Copy engines that run beside kernels (0: copies and kernels do not overlap).
  static Error async_engine_count(int* v, int ordinal) {
    return cudaDeviceGetAttribute(v, cudaDevAttrAsyncEngineCount, ordinal);
  }
  static Error pci_bus_id(char* out, int len, int ordinal) { return cudaDeviceGetPCIBusId(out, len, ordinal); }
  static Error memcpy_h2d_async(void* d, const void* h, std::size_t n, Stream s) {
    return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
  }
  static Error memcpy_d2h_async(void* h, const void* d, std::size_t n, Stream s) {
    return cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s);
  }
  static Error memcpy_d2d_async(void* d, const void* s_, std::size_t n, Stream s) {
    return cudaMemcpyAsync(d, s_, n, cudaMemcpyDeviceToDevice, s);
  }
  static Error memcpy_peer_async(void* d, int d_dev, const void* s_, int s_dev, std::size_t n, Stream s) {
    return cudaMemcpyPeerAsync(d, d_dev, s_, s_dev, n, s);
  }
  static Error can_access_peer(int* can, int a, int b) { return cudaDeviceCanAccessPeer(can, a, b); }
  static Error enable_peer_access(int peer) { return cudaDeviceEnablePeerAccess(peer, 0); }
  static bool peer_access_already_enabled(Error rc) { return rc == cudaErrorPeerAccessAlreadyEnabled; }
  static constexpr const char* kHostRegister = "cudaHostRegister";
  // Portable: pinned for every device's context, not only the current one.
  static Error host_register(void* p, std::size_t n) {
    return cudaHostRegister(p, n, cudaHostRegisterPortable);
  }
  static Error host_unregister(void* p) { return cudaHostUnregister(p); }
  // IPC memory another process shared (hw/gpu/gpu_ipc_memory.h).
  using IpcHandle = cudaIpcMemHandle_t;
  static constexpr const char* kIpcHandle = "cudaIpcMemHandle_t";
  static constexpr const char* kIpcOpen = "cudaIpcOpenMemHandle";
  static constexpr const char* kIpcGetHandle = "cudaIpcGetMemHandle";
  static constexpr const char* kMemset = "cudaMemsetAsync";
  static constexpr const char* kMemcpyD2HSync = "cudaMemcpy(D2H)";
  static constexpr const char* kMemcpyH2DSync = "cudaMemcpy(H2D)";
  static Error device_count(int* n) { return cudaGetDeviceCount(n); }
  static Error ipc_open(void** p, IpcHandle h) { return cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess); }
  static Error ipc_close(void* p) { return cudaIpcCloseMemHandle(p); }
  static Error ipc_get_handle(IpcHandle* h, void* p) { return cudaIpcGetMemHandle(h, p); }
  static Error memset_async(void* p, int v, std::size_t n, Stream s) { return cudaMemsetAsync(p, v, n, s); }
  static Error memcpy_d2h(void* h, const void* d, std::size_t n) { return cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost); }
  static Error memcpy_h2d(void* d, const void* h, std::size_t n) { return cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); }
  // Sets *flag when any of the n floats at x is NaN or Inf (kernels/cuda/kernels.h).
  static Error flag_non_finite(const float* x, std::size_t n, unsigned int* flag, Stream s);
  static const char* error_string(Error rc) { return cudaGetErrorString(rc); }
};

}  // namespace dype::hw
