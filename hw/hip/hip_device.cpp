#include "hw/hip/hip_device.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include <rocsparse/rocsparse.h>
#include <spdlog/spdlog.h>

#include "hw/hip/hip_buffer.h"
#include "hw/hip/hip_smi.h"
#include "kernels/hip/kernels.h"
#include "kernels/hip/launch_plan.h"

namespace dype::hw {

namespace kh = kernels::hip;
using kernels::OpKind;
using kernels::Epilogue;

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

// One cached SpMM plan: the CSR and dense descriptors, the workspace and the preprocessing done by
// the rocsparse_spmm_stage_preprocess stage. Valid while the three CSR buffers keep their identity
// and contents.
struct HipDevice::SpmmPlan {
  using Key = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                         std::uint64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>;
  rocsparse_spmat_descr a = nullptr;
  rocsparse_dnmat_descr b = nullptr, c = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::uint64_t last_use = 0;
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

struct HipDevice::Queue {
  hipStream_t stream = nullptr;
  hipEvent_t start = nullptr, stop = nullptr;
  rocsparse_handle sparse = nullptr;
  std::mutex mutex;  // one launch at a time per stream: the handle and events are per queue
  std::map<SpmmPlan::Key, std::unique_ptr<SpmmPlan>> plans;
  std::uint64_t uses = 0;

  explicit Queue(const std::string& dev) {
    // A throwing constructor runs no destructor: release what was made so far.
    try {
      hip_check(dev, "hipStreamCreateWithFlags", hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
      hip_check(dev, "hipEventCreate", hipEventCreate(&start));
      hip_check(dev, "hipEventCreate", hipEventCreate(&stop));
      sparse_check(dev, "rocsparse_create_handle", rocsparse_create_handle(&sparse));
      sparse_check(dev, "rocsparse_set_stream", rocsparse_set_stream(sparse, stream));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Queue() { release(); }
  void release() {
    plans.clear();
    if (sparse) rocsparse_destroy_handle(sparse);
    if (start) (void)hipEventDestroy(start);
    if (stop) (void)hipEventDestroy(stop);
    if (stream) (void)hipStreamDestroy(stream);
    sparse = nullptr;
    start = stop = nullptr;
    stream = nullptr;
  }
};

// Two pinned slots and a copy stream: the host memcpy of one chunk overlaps the DMA of the other.
struct HipDevice::Staging {
  HipPinnedHostBuffer slot[2];
  hipEvent_t done[2] = {nullptr, nullptr};
  hipStream_t stream = nullptr;
  Staging(const std::string& dev, std::size_t chunk) : slot{HipPinnedHostBuffer(chunk), HipPinnedHostBuffer(chunk)} {
    try {
      hip_check(dev, "hipStreamCreateWithFlags", hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
      for (auto& e : done) {
        hip_check(dev, "hipEventCreateWithFlags", hipEventCreateWithFlags(&e, hipEventDisableTiming));
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~Staging() { release(); }
  void release() {
    for (auto& e : done) {
      if (e) (void)hipEventDestroy(e);
      e = nullptr;
    }
    if (stream) (void)hipStreamDestroy(stream);
    stream = nullptr;
  }
};

HipDevice::HipDevice(DeviceInfo info, int ordinal, HipOptions options)
    : Device(std::move(info)), ordinal_(ordinal), options_(options) {
  mutable_info().kind = DeviceKind::gpu;
  mutable_info().backend = "hip";
  mutable_info().time_source = TimeSource::measured;
  set_current();
  int smem = 0, warp = 0;
  hip_check(name(), "hipDeviceGetAttribute(MaxSharedMemoryPerBlock)",
            hipDeviceGetAttribute(&smem, hipDeviceAttributeMaxSharedMemoryPerBlock, ordinal_));
  hip_check(name(), "hipDeviceGetAttribute(WarpSize)",
            hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, ordinal_));
  max_shared_bytes_ = static_cast<std::size_t>(smem);
  warp_size_ = warp;
  for (int i = 0; i < std::max(1, options_.queues); ++i) queues_.push_back(std::make_unique<Queue>(name()));
  staging_ = std::make_unique<Staging>(name(), std::max<std::size_t>(options_.staging_chunk_bytes, 4096));
  char bus[32] = {};
  if (hipDeviceGetPCIBusId(bus, sizeof bus, ordinal_) == hipSuccess) pci_bus_id_ = bus;
  std::string why;
  smi_ = RocmSmi::load(&why);
  if (!smi_) {
    spdlog::info("{}: no ROCm SMI energy readings: {}", this->name(), why);
  } else if (auto e = smi_->total_energy_j(pci_bus_id_)) {
    energy_at_start_j_ = *e;
  }
}

HipDevice::~HipDevice() {
  (void)hipSetDevice(ordinal_);
  for (const auto& w : windows_) (void)hipHostUnregister(const_cast<std::byte*>(w.first));
  queues_.clear();
  staging_.reset();
}

void HipDevice::set_current() const { hip_check(name(), "hipSetDevice", hipSetDevice(ordinal_)); }

HipDevice::Queue& HipDevice::queue(int index) {
  return *queues_[static_cast<std::size_t>(std::max(0, index)) % queues_.size()];
}

bool HipDevice::supports(OpKind op) const {
  switch (op) {
    case OpKind::spmm:
    case OpKind::gemm:
    case OpKind::window_attention:
    case OpKind::softmax:
      return true;
    case OpKind::layer_norm:
      return false;  // not ported: the scheduler keeps it on the CPU (as on the cuda backend)
  }
  return false;
}

BufferPtr HipDevice::allocate(std::size_t bytes, AllocMode) {
  return std::make_unique<HipBuffer>(*this, bytes);
}

namespace {
HipBuffer& on_device(const Buffer* b, const HipDevice& dev, const char* arg) {
  auto* hb = dynamic_cast<HipBuffer*>(const_cast<Buffer*>(b));
  if (!hb || &hb->device() != &dev) throw InputError(dev.name(), std::string(arg) + ": buffer is not on this device");
  return *hb;
}
}  // namespace

Event HipDevice::timed(Queue& q, const std::function<void()>& enqueue) {
  hip_check(name(), "hipEventRecord", hipEventRecord(q.start, q.stream));
  enqueue();
  hip_check(name(), "hipEventRecord", hipEventRecord(q.stop, q.stream));
  hip_check(name(), "hipEventSynchronize", hipEventSynchronize(q.stop));
  float ms = 0.0f;
  hip_check(name(), "hipEventElapsedTime", hipEventElapsedTime(&ms, q.start, q.stop));
  Event e;
  e.source = TimeSource::measured;
  e.end_s = now_s();
  e.start_s = e.end_s - ms * 1e-3;
  return e;
}

void HipDevice::run_spmm(Queue& q, const KernelLaunch& l) {
  const auto& s = l.shape;
  auto& indptr = on_device(l.inputs[0], *this, "indptr");
  auto& indices = on_device(l.inputs[1], *this, "indices");
  auto& values = on_device(l.inputs[2], *this, "values");
  auto& x = on_device(l.inputs[3], *this, "x");
  auto& y = on_device(l.output, *this, "y");
  const kh::SpmmDescriptor d = kh::spmm_descriptor(s.m, s.k, s.n, s.nnz, l.index_bytes);
  if (s.m == 0 || s.n == 0) return;
  const SpmmPlan::Key key{indptr.id(), indptr.generation(), indices.id(), indices.generation(),
                          values.id(), values.generation(), s.m, s.k, s.n, s.nnz, l.index_bytes};
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = rocsparse_operation_none;
  const auto alg = rocsparse_spmm_alg_default;
  const auto f32 = static_cast<rocsparse_datatype>(d.data_type);
  auto it = q.plans.find(key);
  if (it == q.plans.end()) {
    // Plans of a graph whose buffers changed are dead: drop them, and keep the cache small.
    std::erase_if(q.plans, [&](const auto& kv) {
      return std::get<0>(kv.first) == indptr.id() || std::get<2>(kv.first) == indices.id();
    });
    if (q.plans.size() >= 8) {
      auto oldest = std::min_element(q.plans.begin(), q.plans.end(), [](const auto& a, const auto& b) {
        return a.second->last_use < b.second->last_use;
      });
      q.plans.erase(oldest);
    }
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
                 rocsparse_spmm(q.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c, f32, alg,
                                rocsparse_spmm_stage_buffer_size, &plan->workspace_bytes, nullptr));
    if (plan->workspace_bytes > 0) {
      hip_check(name(), "hipMalloc(spmm workspace)", hipMalloc(&plan->workspace, plan->workspace_bytes));
    }
    sparse_check(name(), "rocsparse_spmm(preprocess)",
                 rocsparse_spmm(q.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c, f32, alg,
                                rocsparse_spmm_stage_preprocess, &plan->workspace_bytes, plan->workspace));
    ++spmm_plans_built_;
    it = q.plans.emplace(key, std::move(plan)).first;
  } else {
    // Same graph, new features: only the dense operands move.
    sparse_check(name(), "rocsparse_dnmat_set_values(x)", rocsparse_dnmat_set_values(it->second->b, x.device_ptr()));
    sparse_check(name(), "rocsparse_dnmat_set_values(y)", rocsparse_dnmat_set_values(it->second->c, y.device_ptr()));
  }
  it->second->last_use = ++q.uses;
  SpmmPlan& p = *it->second;
  sparse_check(name(), "rocsparse_spmm(compute)",
               rocsparse_spmm(q.sparse, op, op, &alpha, p.a, p.b, &beta, p.c, f32, alg,
                              rocsparse_spmm_stage_compute, &p.workspace_bytes, p.workspace));
}

void HipDevice::run_gemm(Queue& q, const KernelLaunch& l) {
  const auto& s = l.shape;
  auto& x = on_device(l.inputs[0], *this, "x");
  auto& w = on_device(l.inputs[1], *this, "w");
  auto& y = on_device(l.output, *this, "y");
  const bool bias = l.epilogue == Epilogue::bias || l.epilogue == Epilogue::bias_relu;
  const bool relu = l.epilogue == Epilogue::relu || l.epilogue == Epilogue::bias_relu;
  const float* b = bias ? on_device(l.inputs[2], *this, "bias").ptr<const float>() : nullptr;
  hip_check(name(), "gemm",
            kh::gemm(x.ptr<const float>(), w.ptr<const float>(), b, y.ptr<float>(), s.m, s.k, s.n, relu, q.stream));
}

Event HipDevice::do_launch(const KernelLaunch& l, std::span<const Event>, int queue_index) {
  if (!supports(l.shape.kind)) {
    throw DeviceError(name(), std::string(kernels::to_string(l.shape.kind)) + " is not supported on the hip backend");
  }
  set_current();
  Queue& q = queue(queue_index);
  std::lock_guard lock(q.mutex);
  // `after` needs no wait: every Event is complete when returned (hw/event.h).
  Event e = timed(q, [&] {
    const auto& s = l.shape;
    switch (s.kind) {
      case OpKind::spmm: run_spmm(q, l); break;
      case OpKind::gemm: run_gemm(q, l); break;
      case OpKind::window_attention: {
        const kh::WindowDims d{s.seq_len, s.heads, s.head_dim, s.window};
        hip_check(name(), "window_attention",
                  kh::window_attention(on_device(l.inputs[0], *this, "q").ptr<const float>(),
                                       on_device(l.inputs[1], *this, "k").ptr<const float>(),
                                       on_device(l.inputs[2], *this, "v").ptr<const float>(),
                                       on_device(l.output, *this, "out").ptr<float>(), d, q.stream,
                                       max_shared_bytes_));
        break;
      }
      case OpKind::softmax:
        hip_check(name(), "row_softmax",
                  kh::row_softmax(on_device(l.output, *this, "x").ptr<float>(), s.m, s.n, warp_size_, q.stream));
        break;
      case OpKind::layer_norm: break;  // rejected by supports()
    }
  });
  on_device(l.output, *this, "output").mark_written();
  return e;
}

Event HipDevice::do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                              std::span<const Event>) {
  auto& d = on_device(&dst, *this, "copy_from_host dst");
  set_current();
  std::lock_guard lock(staging_mutex_);
  Staging& st = *staging_;
  Event e;
  e.start_s = now_s();
  bool used[2] = {false, false};
  for (const kh::Chunk& c : kh::staging_chunks(src.size(), st.slot[0].size())) {
    const auto s = static_cast<std::size_t>(c.slot);
    if (used[s]) hip_check(name(), "hipEventSynchronize", hipEventSynchronize(st.done[s]));
    std::memcpy(st.slot[s].data(), src.data() + c.offset, c.bytes);
    hip_check(name(), "hipMemcpyAsync(H2D)",
              hipMemcpyAsync(d.ptr<std::byte>() + offset + c.offset, st.slot[s].data(), c.bytes,
                             hipMemcpyHostToDevice, st.stream));
    hip_check(name(), "hipEventRecord", hipEventRecord(st.done[s], st.stream));
    used[s] = true;
  }
  hip_check(name(), "hipStreamSynchronize", hipStreamSynchronize(st.stream));
  e.end_s = now_s();
  d.mark_written();
  return e;
}

Event HipDevice::do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                            std::span<const Event>) {
  auto& s = on_device(&src, *this, "copy_to_host src");
  set_current();
  std::lock_guard lock(staging_mutex_);
  Staging& st = *staging_;
  const auto chunks = kh::staging_chunks(dst.size(), st.slot[0].size());
  Event e;
  e.start_s = now_s();
  auto issue = [&](const kh::Chunk& c) {
    hip_check(name(), "hipMemcpyAsync(D2H)",
              hipMemcpyAsync(st.slot[c.slot].data(), s.ptr<const std::byte>() + offset + c.offset, c.bytes,
                             hipMemcpyDeviceToHost, st.stream));
    hip_check(name(), "hipEventRecord", hipEventRecord(st.done[c.slot], st.stream));
  };
  if (!chunks.empty()) issue(chunks[0]);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (i + 1 < chunks.size()) issue(chunks[i + 1]);  // its slot was emptied by the previous iteration
    const kh::Chunk& c = chunks[i];
    hip_check(name(), "hipEventSynchronize", hipEventSynchronize(st.done[c.slot]));
    std::memcpy(dst.data() + c.offset, st.slot[c.slot].data(), c.bytes);
  }
  e.end_s = now_s();
  return e;
}

bool HipDevice::can_copy_peer(const HipDevice& peer) const {
  if (!options_.allow_p2p || !peer.options_.allow_p2p) return false;
  int can = 0;
  if (hipDeviceCanAccessPeer(&can, ordinal_, peer.ordinal_) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return can != 0;
}

Event HipDevice::do_copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after) {
  auto* peer = dynamic_cast<HipDevice*>(&dst.device());
  const bool same = peer == this;
  if (!peer || (!same && !can_copy_peer(*peer))) return copy_to_peer_staged(src, dst, after);
  auto& s = on_device(&src, *this, "copy_to_peer src");
  auto& d = dynamic_cast<HipBuffer&>(dst);
  set_current();
  if (!same) {
    std::lock_guard lock(peers_mutex_);
    if (std::find(peers_enabled_.begin(), peers_enabled_.end(), peer->ordinal()) == peers_enabled_.end()) {
      const hipError_t rc = hipDeviceEnablePeerAccess(peer->ordinal(), 0);
      if (rc == hipErrorPeerAccessAlreadyEnabled) {
        (void)hipGetLastError();
      } else {
        hip_check(name(), "hipDeviceEnablePeerAccess", rc);
      }
      peers_enabled_.push_back(peer->ordinal());
    }
  }
  std::lock_guard lock(staging_mutex_);
  Event e;
  e.start_s = now_s();
  const hipError_t rc = same ? hipMemcpyAsync(d.device_ptr(), s.device_ptr(), src.size_bytes(),
                                              hipMemcpyDeviceToDevice, staging_->stream)
                             : hipMemcpyPeerAsync(d.device_ptr(), peer->ordinal(), s.device_ptr(), ordinal_,
                                                  src.size_bytes(), staging_->stream);
  hip_check(name(), same ? "hipMemcpyAsync(D2D)" : "hipMemcpyPeerAsync", rc);
  hip_check(name(), "hipStreamSynchronize", hipStreamSynchronize(staging_->stream));
  e.end_s = now_s();
  d.mark_written();
  return e;
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

Event HipDevice::copy_mapped(void* to, const void* from, std::size_t bytes) {
  std::lock_guard lock(staging_mutex_);
  Event e;
  e.start_s = now_s();
  // hipMemcpyDefault: the runtime resolves both addresses (device memory, registered window).
  hip_check(name(), "hipMemcpyAsync(mapped window)", hipMemcpyAsync(to, from, bytes, hipMemcpyDefault, staging_->stream));
  hip_check(name(), "hipStreamSynchronize", hipStreamSynchronize(staging_->stream));
  e.end_s = now_s();
  return e;
}

Event HipDevice::copy_to_mapped(const Buffer& src, std::span<std::byte> window, std::size_t src_offset) {
  auto& s = on_device(&src, *this, "copy_to_mapped src");
  check_copy_range(name() + ": copy_to_mapped", src_offset, window.size(), src.size_bytes());
  if (window.empty()) return instant();
  set_current();
  register_window(window.data(), window.size());
  return copy_mapped(window.data(), s.ptr<const std::byte>() + src_offset, window.size());
}

Event HipDevice::copy_from_mapped(Buffer& dst, std::span<const std::byte> window, std::size_t dst_offset) {
  auto& d = on_device(&dst, *this, "copy_from_mapped dst");
  check_copy_range(name() + ": copy_from_mapped", dst_offset, window.size(), dst.size_bytes());
  if (window.empty()) return instant();
  set_current();
  register_window(window.data(), window.size());
  Event e = copy_mapped(d.ptr<std::byte>() + dst_offset, window.data(), window.size());
  d.mark_written();
  return e;
}

std::optional<EnergyReport> HipDevice::energy() const {
  if (!smi_) return std::nullopt;
  const auto total = smi_->total_energy_j(pci_bus_id_);
  if (!total) return std::nullopt;
  // ROCm SMI has one accumulator for the board: the split by state is not observable, so it is
  // all reported as execute energy.
  EnergyReport r;
  r.execute_j = *total - energy_at_start_j_;
  return r;
}

DeviceInfo hip_device_info(int ordinal, const std::string& name) {
  hipDeviceProp_t p{};
  hip_check(name, "hipGetDeviceProperties", hipGetDeviceProperties(&p, ordinal));
  DeviceInfo info;
  info.name = name;
  info.kind = DeviceKind::gpu;
  info.backend = "hip";
  info.model = p.name;
  if (p.gcnArchName[0] != '\0') info.model += std::string(" (") + p.gcnArchName + ")";
  info.memory_bytes = p.totalGlobalMem;
  info.time_source = TimeSource::measured;
  return info;
}

}  // namespace dype::hw
