#include "hw/hip/hip_device.h"

#include <algorithm>

#include <rocsparse/rocsparse.h>

#include "hw/gpu/gpu_device_impl.h"
#include "hw/gpu/spmm_plan_cache.h"
#include "kernels/hip/kernels.h"
#include "kernels/hip/launch_plan.h"

namespace dype::hw {

namespace kh = kernels::hip;
using kernels::OpKind;

// launch_plan.cpp maps these codes without the headers; keep the numbers honest.
static_assert(hipErrorInvalidValue == 1 && hipErrorOutOfMemory == 2 && hipErrorNotInitialized == 3 &&
              hipErrorInvalidConfiguration == 9 && hipErrorInvalidDevicePointer == 17 &&
              hipErrorInvalidMemcpyDirection == 21 && hipErrorInsufficientDriver == 35 &&
              hipErrorNoDevice == 100 && hipErrorInvalidDevice == 101 && hipErrorNoBinaryForGpu == 209 &&
              hipErrorPeerAccessUnsupported == 217 && hipErrorNotSupported == 801);
static_assert(rocsparse_status_invalid_handle == 1 && rocsparse_status_not_implemented == 2 &&
              rocsparse_status_invalid_pointer == 3 && rocsparse_status_invalid_size == 4 &&
              rocsparse_status_memory_error == 5 && rocsparse_status_invalid_value == 7 &&
              rocsparse_status_arch_mismatch == 8 && rocsparse_status_not_initialized == 10 &&
              rocsparse_status_type_mismatch == 11 && rocsparse_status_requires_sorted_storage == 12);
static_assert(rocsparse_indextype_i32 == 2 && rocsparse_indextype_i64 == 3 && rocsparse_order_row == 0 &&
              rocsparse_datatype_f32_r == 151);

namespace {

[[noreturn]] void raise(const std::string& device, std::string_view call, int code,
                        std::string_view name, std::string_view text, kh::ErrorClass cls) {
  const std::string full = kh::format_error(device, call, code, name, text);
  const std::string problem = full.substr(device.size() + 2);
  if (cls == kh::ErrorClass::invalid_argument) throw InputError(device, problem);
  throw DeviceError(device, problem + " [" + std::string(kh::to_string(cls)) + "]");
}

void sparse_check(const std::string& device, std::string_view call, rocsparse_status rc) {
  if (rc == rocsparse_status_success) return;
  raise(device, call, rc, kh::rocsparse_status_name(rc), "", kh::classify_rocsparse_status(rc));
}

}  // namespace

void hip_check(const std::string& device, std::string_view call, hipError_t rc) {
  if (rc == hipSuccess) return;
  raise(device, call, rc, hipGetErrorName(rc), hipGetErrorString(rc), kh::classify_hip_error(rc));
}

template class GpuDevice<HipRuntime>;

namespace {

// One cached SpMM plan: the CSR and dense descriptors, the workspace and the preprocessing done by
// the rocsparse_spmm_stage_preprocess stage.
struct SpmmPlan {
  rocsparse_spmat_descr a = nullptr;
  rocsparse_dnmat_descr b = nullptr, c = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  SpmmPlan() = default;
  SpmmPlan(const SpmmPlan&) = delete;
  SpmmPlan& operator=(const SpmmPlan&) = delete;
  ~SpmmPlan() {
    if (a) rocsparse_destroy_spmat_descr(a);
    if (b) rocsparse_destroy_dnmat_descr(b);
    if (c) rocsparse_destroy_dnmat_descr(c);
    if (workspace) (void)hipFree(workspace);
  }
};

}  // namespace

struct HipDevice::Libraries {
  rocsparse_handle sparse = nullptr;
  SpmmPlanCache<SpmmPlan> plans;

  Libraries(const std::string& dev, hipStream_t stream) {
    try {
      sparse_check(dev, "rocsparse_create_handle", rocsparse_create_handle(&sparse));
      sparse_check(dev, "rocsparse_set_stream", rocsparse_set_stream(sparse, stream));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Libraries() { release(); }
  void release() {
    plans.clear();
    if (sparse) rocsparse_destroy_handle(sparse);
    sparse = nullptr;
  }
};

HipDevice::HipDevice(DeviceInfo info, int ordinal, HipOptions options) : GpuDevice(std::move(info), ordinal, options) {
  int warp = 0;
  hip_check(name(), "hipDeviceGetAttribute(WarpSize)", hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, ordinal));
  warp_size_ = warp;
  for (int i = 0; i < queue_count(); ++i) libraries_.push_back(std::make_unique<Libraries>(name(), queue_stream(i)));
}

HipDevice::~HipDevice() {
  (void)hipSetDevice(ordinal());
  for (const auto& w : windows_) (void)hipHostUnregister(const_cast<std::byte*>(w.first));
  libraries_.clear();
}

void HipDevice::run_spmm(int queue, hipStream_t, const KernelLaunch& l) {
  Libraries& lib = *libraries_[static_cast<std::size_t>(queue)];
  const auto& s = l.shape;
  auto& indptr = on_device(l.inputs[0], "indptr");
  auto& indices = on_device(l.inputs[1], "indices");
  auto& values = on_device(l.inputs[2], "values");
  auto& x = on_device(l.inputs[3], "x");
  auto& y = on_device(l.output, "y");
  const kh::SpmmDescriptor d = kh::spmm_descriptor(s.m, s.k, s.n, s.nnz, l.index_bytes);
  if (s.m == 0 || s.n == 0) return;
  const SpmmPlanKey key{indptr.id(), indptr.generation(), indices.id(), indices.generation(),
                        values.id(), values.generation(), s.m, s.k, s.n, s.nnz, l.index_bytes};
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = rocsparse_operation_none;
  const auto alg = rocsparse_spmm_alg_default;
  const auto f32 = static_cast<rocsparse_datatype>(d.data_type);
  SpmmPlan* p = lib.plans.find(key);
  if (p == nullptr) {
    auto plan = std::make_unique<SpmmPlan>();
    const auto itype = static_cast<rocsparse_indextype>(d.index_type);
    const auto order = static_cast<rocsparse_order>(d.order);
    sparse_check(name(), "rocsparse_create_csr_descr",
                 rocsparse_create_csr_descr(&plan->a, d.a_rows, d.a_cols, d.nnz, indptr.device_ptr(),
                                            indices.device_ptr(), values.device_ptr(), itype, itype,
                                            rocsparse_index_base_zero, f32));
    sparse_check(name(), "rocsparse_create_dnmat_descr(x)",
                 rocsparse_create_dnmat_descr(&plan->b, d.b_rows, d.b_cols, d.ldb, x.device_ptr(), f32, order));
    sparse_check(name(), "rocsparse_create_dnmat_descr(y)",
                 rocsparse_create_dnmat_descr(&plan->c, d.c_rows, d.c_cols, d.ldc, y.device_ptr(), f32, order));
    sparse_check(name(), "rocsparse_spmm(buffer_size)",
                 rocsparse_spmm(lib.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c, f32, alg,
                                rocsparse_spmm_stage_buffer_size, &plan->workspace_bytes, nullptr));
    if (plan->workspace_bytes > 0) {
      hip_check(name(), "hipMalloc(spmm workspace)", hipMalloc(&plan->workspace, plan->workspace_bytes));
    }
    sparse_check(name(), "rocsparse_spmm(preprocess)",
                 rocsparse_spmm(lib.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c, f32, alg,
                                rocsparse_spmm_stage_preprocess, &plan->workspace_bytes, plan->workspace));
    count_spmm_plan();
    p = &lib.plans.insert(key, std::move(plan));
  } else {
    // Same graph, new features: only the dense operands move.
    sparse_check(name(), "rocsparse_dnmat_set_values(x)", rocsparse_dnmat_set_values(p->b, x.device_ptr()));
    sparse_check(name(), "rocsparse_dnmat_set_values(y)", rocsparse_dnmat_set_values(p->c, y.device_ptr()));
  }
  sparse_check(name(), "rocsparse_spmm(compute)",
               rocsparse_spmm(lib.sparse, op, op, &alpha, p->a, p->b, &beta, p->c, f32, alg,
                              rocsparse_spmm_stage_compute, &p->workspace_bytes, p->workspace));
}

void HipDevice::run_gemm(int, hipStream_t stream, const KernelLaunch& l) {
  const auto& s = l.shape;
  auto& x = on_device(l.inputs[0], "x");
  auto& w = on_device(l.inputs[1], "w");
  auto& y = on_device(l.output, "y");
  const float* b = kernels::has_bias(l.epilogue) ? on_device(l.inputs[2], "bias").ptr<const float>() : nullptr;
  const float* r = kernels::has_residual(l.epilogue) ? on_device(l.inputs[3], "residual").ptr<const float>() : nullptr;
  const auto act = kernels::has_relu(l.epilogue)   ? kh::Activation::relu
                   : kernels::has_gelu(l.epilogue) ? kh::Activation::gelu
                                                   : kh::Activation::none;
  hip_check(name(), "gemm",
            kh::gemm(x.ptr<const float>(), w.ptr<const float>(), b, r, y.ptr<float>(), s.m, s.k, s.n, act, stream));
}

void HipDevice::run_window_attention(hipStream_t stream, const KernelLaunch& l) {
  const auto& s = l.shape;
  const kh::WindowDims d{s.seq_len, s.heads, s.head_dim, s.window};
  hip_check(name(), "window_attention",
            kh::window_attention(on_device(l.inputs[0], "q").ptr<const float>(),
                                 on_device(l.inputs[1], "k").ptr<const float>(),
                                 on_device(l.inputs[2], "v").ptr<const float>(),
                                 on_device(l.output, "out").ptr<float>(), d, stream, max_shared_bytes()));
}

void HipDevice::run_layer_norm(hipStream_t stream, const KernelLaunch& l) {
  hip_check(name(), "layer_norm",
            kh::layer_norm(on_device(l.inputs[0], "x").ptr<const float>(), on_device(l.inputs[1], "gamma").ptr<const float>(),
                           on_device(l.inputs[2], "beta").ptr<const float>(), on_device(l.output, "y").ptr<float>(),
                           l.shape.m, l.shape.n, l.eps, warp_size_, stream));
}

void HipDevice::run_softmax(hipStream_t stream, const KernelLaunch& l) {
  hip_check(name(), "row_softmax",
            kh::row_softmax(on_device(l.output, "x").ptr<float>(), l.shape.m, l.shape.n, warp_size_, stream));
}

namespace {
Event instant() {
  Event e;
  e.start_s = e.end_s = now_s();
  return e;
}
}  // namespace

void HipDevice::register_window(const std::byte* base, std::size_t bytes) {
  std::lock_guard lock(windows_mutex_);
  for (const auto& w : windows_) {
    if (base >= w.first && base + bytes <= w.first + w.second) return;  // inside a registered one
  }
  const hipError_t rc =
      hipHostRegister(const_cast<std::byte*>(base), bytes, hipHostRegisterMapped | hipHostRegisterIoMemory);
  if (rc == hipErrorHostMemoryAlreadyRegistered) {
    (void)hipGetLastError();  // registered by someone else in this process: usable as it is
    return;
  }
  hip_check(name(), "hipHostRegister(mapped window of " + std::to_string(bytes) + " bytes)", rc);
  windows_.emplace_back(base, bytes);
}

Event HipDevice::copy_mapped(CopyDirection direction, void* to, const void* from, std::size_t bytes) {
  return copy_on_staging_stream(direction, [&](hipStream_t stream) {
    // hipMemcpyDefault: the runtime resolves both addresses (device memory, registered window).
    hip_check(name(), "hipMemcpyAsync(mapped window)", hipMemcpyAsync(to, from, bytes, hipMemcpyDefault, stream));
  });
}

Event HipDevice::copy_to_mapped(const hw::Buffer& src, std::span<std::byte> window, std::size_t src_offset) {
  auto& s = on_device(&src, "copy_to_mapped src");
  check_copy_range(name() + ": copy_to_mapped", src_offset, window.size(), src.size_bytes());
  if (window.empty()) return instant();
  set_current();
  register_window(window.data(), window.size());
  return copy_mapped(CopyDirection::outbound, window.data(), s.template ptr<const std::byte>() + src_offset,
                     window.size());
}

Event HipDevice::copy_from_mapped(hw::Buffer& dst, std::span<const std::byte> window, std::size_t dst_offset) {
  auto& d = on_device(&dst, "copy_from_mapped dst");
  check_copy_range(name() + ": copy_from_mapped", dst_offset, window.size(), dst.size_bytes());
  if (window.empty()) return instant();
  set_current();
  register_window(window.data(), window.size());
  Event e = copy_mapped(CopyDirection::inbound, d.template ptr<std::byte>() + dst_offset, window.data(), window.size());
  d.mark_written();
  return e;
}

DeviceInfo hip_device_info(int ordinal, const std::string& name) {
  hipDeviceProp_t p{};
  hip_check(name, "hipGetDeviceProperties", hipGetDeviceProperties(&p, ordinal));
  DeviceInfo info;
  info.name = name;
  info.kind = DeviceKind::gpu;
  info.backend = "hip";
  info.product = p.name;
  if (p.gcnArchName[0] != '\0') info.product += std::string(" (") + p.gcnArchName + ")";
  info.memory_bytes = p.totalGlobalMem;
  info.time_source = TimeSource::measured;
  return info;
}

}  // namespace dype::hw
