#include "hw/cuda/cuda_device.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include <cublas_v2.h>
#include <cusparse.h>
#include <spdlog/spdlog.h>

#include "hw/cuda/cuda_buffer.h"
#include "hw/cuda/cuda_nvml.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch_plan.h"

namespace dype::hw {

namespace kc = kernels::cuda;
using kernels::OpKind;
using kernels::Epilogue;

// launch_plan.cpp maps these codes without the headers; keep the numbers honest.
static_assert(cudaErrorInvalidValue == 1 && cudaErrorMemoryAllocation == 2 &&
              cudaErrorInitializationError == 3 && cudaErrorStubLibrary == 34 &&
              cudaErrorInsufficientDriver == 35 && cudaErrorNoDevice == 100 &&
              cudaErrorInvalidDevice == 101 && cudaErrorNoKernelImageForDevice == 209 &&
              cudaErrorPeerAccessUnsupported == 217 && cudaErrorNotSupported == 801 &&
              cudaErrorSystemDriverMismatch == 803 && cudaErrorCompatNotSupportedOnDevice == 804);
static_assert(CUBLAS_STATUS_NOT_INITIALIZED == 1 && CUBLAS_STATUS_ALLOC_FAILED == 3 &&
              CUBLAS_STATUS_INVALID_VALUE == 7 && CUBLAS_STATUS_ARCH_MISMATCH == 8 &&
              CUBLAS_STATUS_NOT_SUPPORTED == 15);
static_assert(CUSPARSE_STATUS_NOT_INITIALIZED == 1 && CUSPARSE_STATUS_ALLOC_FAILED == 2 &&
              CUSPARSE_STATUS_INVALID_VALUE == 3 && CUSPARSE_STATUS_ARCH_MISMATCH == 4 &&
              CUSPARSE_STATUS_NOT_SUPPORTED == 10 && CUSPARSE_STATUS_INSUFFICIENT_RESOURCES == 11);

namespace {

[[noreturn]] void raise(const std::string& device, std::string_view call, int code,
                        std::string_view name, std::string_view text, kc::ErrorClass cls) {
  const std::string full = kc::format_error(device, call, code, name, text);
  const std::string problem = full.substr(device.size() + 2);
  if (cls == kc::ErrorClass::invalid_argument) throw InputError(device, problem);
  throw DeviceError(device, problem + " [" + std::string(kc::to_string(cls)) + "]");
}

void blas_check(const std::string& device, std::string_view call, cublasStatus_t rc) {
  if (rc == CUBLAS_STATUS_SUCCESS) return;
  raise(device, call, rc, cublasGetStatusName(rc), cublasGetStatusString(rc),
        kc::classify_cublas_status(rc));
}

void sparse_check(const std::string& device, std::string_view call, cusparseStatus_t rc) {
  if (rc == CUSPARSE_STATUS_SUCCESS) return;
  raise(device, call, rc, cusparseGetErrorName(rc), cusparseGetErrorString(rc),
        kc::classify_cusparse_status(rc));
}

}  // namespace

void cuda_check(const std::string& device, std::string_view call, cudaError_t rc) {
  if (rc == cudaSuccess) return;
  raise(device, call, rc, cudaGetErrorName(rc), cudaGetErrorString(rc), kc::classify_cuda_error(rc));
}

// One cached SpMM plan: the CSR and dense descriptors, the workspace and the preprocessing done by
// cusparseSpMM_preprocess. Valid while the three CSR buffers keep their identity and contents.
struct CudaDevice::SpmmPlan {
  using Key = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                         std::uint64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>;
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnMatDescr_t b = nullptr, c = nullptr;
  void* workspace = nullptr;
  std::uint64_t last_use = 0;
  ~SpmmPlan() {
    if (a) cusparseDestroySpMat(a);
    if (b) cusparseDestroyDnMat(b);
    if (c) cusparseDestroyDnMat(c);
    if (workspace) cudaFree(workspace);
  }
};

struct CudaDevice::Queue {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t blas = nullptr;
  cusparseHandle_t sparse = nullptr;
  std::mutex mutex;  // one launch at a time per stream: handles and events are per queue
  std::map<SpmmPlan::Key, std::unique_ptr<SpmmPlan>> plans;
  std::uint64_t uses = 0;

  explicit Queue(const std::string& dev) {
    cuda_check(dev, "cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cuda_check(dev, "cudaEventCreate", cudaEventCreate(&start));
    cuda_check(dev, "cudaEventCreate", cudaEventCreate(&stop));
    blas_check(dev, "cublasCreate", cublasCreate(&blas));
    blas_check(dev, "cublasSetStream", cublasSetStream(blas, stream));
    sparse_check(dev, "cusparseCreate", cusparseCreate(&sparse));
    sparse_check(dev, "cusparseSetStream", cusparseSetStream(sparse, stream));
  }
  ~Queue() {
    plans.clear();
    if (sparse) cusparseDestroy(sparse);
    if (blas) cublasDestroy(blas);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Two pinned slots and a copy stream: the host memcpy of one chunk overlaps the DMA of the other.
struct CudaDevice::Staging {
  PinnedHostBuffer slot[2];
  cudaEvent_t done[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;
  Staging(const std::string& dev, std::size_t chunk) : slot{PinnedHostBuffer(chunk), PinnedHostBuffer(chunk)} {
    cuda_check(dev, "cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (auto& e : done) cuda_check(dev, "cudaEventCreateWithFlags", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~Staging() {
    for (auto& e : done) if (e) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
  }
};

CudaDevice::CudaDevice(DeviceInfo info, int ordinal, CudaOptions options)
    : Device(std::move(info)), ordinal_(ordinal), options_(options) {
  mutable_info().kind = DeviceKind::gpu;
  mutable_info().backend = "cuda";
  mutable_info().time_source = TimeSource::measured;
  set_current();
  int smem = 0;
  cuda_check(name(), "cudaDeviceGetAttribute(MaxSharedMemoryPerBlock)",
             cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlock, ordinal_));
  max_shared_bytes_ = static_cast<std::size_t>(smem);
  for (int i = 0; i < std::max(1, options_.queues); ++i) queues_.push_back(std::make_unique<Queue>(name()));
  staging_ = std::make_unique<Staging>(name(), std::max<std::size_t>(options_.staging_chunk_bytes, 4096));
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal_) == cudaSuccess) pci_bus_id_ = bus;
  std::string why;
  nvml_ = Nvml::load(&why);
  if (!nvml_) {
    spdlog::info("{}: no NVML energy readings: {}", this->name(), why);
  } else if (auto e = nvml_->total_energy_j(pci_bus_id_)) {
    energy_at_start_j_ = *e;
  }
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  queues_.clear();
  staging_.reset();
}

void CudaDevice::set_current() const { cuda_check(name(), "cudaSetDevice", cudaSetDevice(ordinal_)); }

CudaDevice::Queue& CudaDevice::queue(int index) {
  return *queues_[static_cast<std::size_t>(std::max(0, index)) % queues_.size()];
}

bool CudaDevice::supports(OpKind op) const {
  switch (op) {
    case OpKind::spmm:
    case OpKind::gemm:
    case OpKind::window_attention:
    case OpKind::softmax:
      return true;
    case OpKind::layer_norm:
      return false;  // not ported yet: the scheduler keeps it on the CPU
  }
  return false;
}

BufferPtr CudaDevice::allocate(std::size_t bytes, AllocMode) {
  return std::make_unique<CudaBuffer>(*this, bytes);
}

namespace {
CudaBuffer& on_device(const Buffer* b, const CudaDevice& dev, const char* arg) {
  auto* cb = dynamic_cast<CudaBuffer*>(const_cast<Buffer*>(b));
  if (!cb || &cb->device() != &dev) throw InputError(dev.name(), std::string(arg) + ": buffer is not on this device");
  return *cb;
}
}  // namespace

Event CudaDevice::timed(Queue& q, const std::function<void()>& enqueue) {
  cuda_check(name(), "cudaEventRecord", cudaEventRecord(q.start, q.stream));
  enqueue();
  cuda_check(name(), "cudaEventRecord", cudaEventRecord(q.stop, q.stream));
  cuda_check(name(), "cudaEventSynchronize", cudaEventSynchronize(q.stop));
  float ms = 0.0f;
  cuda_check(name(), "cudaEventElapsedTime", cudaEventElapsedTime(&ms, q.start, q.stop));
  Event e;
  e.source = TimeSource::measured;
  e.end_s = now_s();
  e.start_s = e.end_s - ms * 1e-3;
  return e;
}

void CudaDevice::run_spmm(Queue& q, const KernelLaunch& l) {
  const auto& s = l.shape;
  auto& indptr = on_device(l.inputs[0], *this, "indptr");
  auto& indices = on_device(l.inputs[1], *this, "indices");
  auto& values = on_device(l.inputs[2], *this, "values");
  auto& x = on_device(l.inputs[3], *this, "x");
  auto& y = on_device(l.output, *this, "y");
  if (s.m == 0 || s.n == 0) return;
  const SpmmPlan::Key key{indptr.id(), indptr.generation(), indices.id(), indices.generation(),
                          values.id(), values.generation(), s.m, s.k, s.n, s.nnz, l.index_bytes};
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  // ALG3 takes row-major dense operands and profits from preprocessing (cuSPARSE SpMM docs).
  const auto alg = CUSPARSE_SPMM_CSR_ALG3;
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
    const auto itype = l.index_bytes == 8 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
    sparse_check(name(), "cusparseCreateCsr",
                 cusparseCreateCsr(&plan->a, s.m, s.k, s.nnz, indptr.device_ptr(), indices.device_ptr(),
                                   values.device_ptr(), itype, itype, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    sparse_check(name(), "cusparseCreateDnMat(x)",
                 cusparseCreateDnMat(&plan->b, s.k, s.n, s.n, x.device_ptr(), CUDA_R_32F, CUSPARSE_ORDER_ROW));
    sparse_check(name(), "cusparseCreateDnMat(y)",
                 cusparseCreateDnMat(&plan->c, s.m, s.n, s.n, y.device_ptr(), CUDA_R_32F, CUSPARSE_ORDER_ROW));
    std::size_t ws = 0;
    sparse_check(name(), "cusparseSpMM_bufferSize",
                 cusparseSpMM_bufferSize(q.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c,
                                         CUDA_R_32F, alg, &ws));
    if (ws > 0) cuda_check(name(), "cudaMalloc(spmm workspace)", cudaMalloc(&plan->workspace, ws));
    sparse_check(name(), "cusparseSpMM_preprocess",
                 cusparseSpMM_preprocess(q.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c,
                                         CUDA_R_32F, alg, plan->workspace));
    ++spmm_plans_built_;
    it = q.plans.emplace(key, std::move(plan)).first;
  } else {
    // Same graph, new features: only the dense operands move.
    sparse_check(name(), "cusparseDnMatSetValues(x)", cusparseDnMatSetValues(it->second->b, x.device_ptr()));
    sparse_check(name(), "cusparseDnMatSetValues(y)", cusparseDnMatSetValues(it->second->c, y.device_ptr()));
  }
  it->second->last_use = ++q.uses;
  SpmmPlan& p = *it->second;
  sparse_check(name(), "cusparseSpMM",
               cusparseSpMM(q.sparse, op, op, &alpha, p.a, p.b, &beta, p.c, CUDA_R_32F, alg, p.workspace));
}

void CudaDevice::run_gemm(Queue& q, const KernelLaunch& l) {
  const auto& s = l.shape;
  auto& x = on_device(l.inputs[0], *this, "x");
  auto& w = on_device(l.inputs[1], *this, "w");
  auto& y = on_device(l.output, *this, "y");
  const bool bias = l.epilogue == Epilogue::bias || l.epilogue == Epilogue::bias_relu;
  const bool relu = l.epilogue == Epilogue::relu || l.epilogue == Epilogue::bias_relu;
  const float* b = bias ? on_device(l.inputs[2], *this, "bias").ptr<const float>() : nullptr;
  if (s.m == 0 || s.n == 0) return;
  const kc::ColMajorGemm g = kc::row_major_gemm_args(s.m, s.k, s.n);
  const float alpha = 1.0f, beta = 0.0f;
  blas_check(name(), "cublasSgemm",
             cublasSgemm(q.blas, CUBLAS_OP_N, CUBLAS_OP_N, g.rows, g.cols, g.inner, &alpha,
                         w.ptr<const float>(), g.lda, x.ptr<const float>(), g.ldb, &beta,
                         y.ptr<float>(), g.ldc));
  cuda_check(name(), "bias_act", kc::bias_act(y.ptr<float>(), b, s.m, s.n, relu, q.stream));
}

Event CudaDevice::do_launch(const KernelLaunch& l, std::span<const Event>, int queue_index) {
  if (!supports(l.shape.kind)) {
    throw DeviceError(name(), std::string(kernels::to_string(l.shape.kind)) + " is not supported on the cuda backend");
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
        const kc::WindowDims d{s.seq_len, s.heads, s.head_dim, s.window};
        cuda_check(name(), "window_attention",
                   kc::window_attention(on_device(l.inputs[0], *this, "q").ptr<const float>(),
                                        on_device(l.inputs[1], *this, "k").ptr<const float>(),
                                        on_device(l.inputs[2], *this, "v").ptr<const float>(),
                                        on_device(l.output, *this, "out").ptr<float>(), d, q.stream,
                                        max_shared_bytes_));
        break;
      }
      case OpKind::softmax:
        cuda_check(name(), "row_softmax",
                   kc::row_softmax(on_device(l.output, *this, "x").ptr<float>(), s.m, s.n, q.stream));
        break;
      case OpKind::layer_norm: break;  // rejected by supports()
    }
  });
  on_device(l.output, *this, "output").mark_written();
  return e;
}

Event CudaDevice::do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                               std::span<const Event>) {
  auto& d = on_device(&dst, *this, "copy_from_host dst");
  set_current();
  std::lock_guard lock(staging_mutex_);
  Staging& st = *staging_;
  const std::size_t chunk = st.slot[0].size();
  Event e;
  e.start_s = now_s();
  bool used[2] = {false, false};
  for (std::size_t pos = 0, c = 0; pos < src.size(); pos += chunk, ++c) {
    const std::size_t s = c % 2, len = std::min(chunk, src.size() - pos);
    if (used[s]) cuda_check(name(), "cudaEventSynchronize", cudaEventSynchronize(st.done[s]));
    std::memcpy(st.slot[s].data(), src.data() + pos, len);
    cuda_check(name(), "cudaMemcpyAsync(H2D)",
               cudaMemcpyAsync(d.ptr<std::byte>() + offset + pos, st.slot[s].data(), len,
                               cudaMemcpyHostToDevice, st.stream));
    cuda_check(name(), "cudaEventRecord", cudaEventRecord(st.done[s], st.stream));
    used[s] = true;
  }
  cuda_check(name(), "cudaStreamSynchronize", cudaStreamSynchronize(st.stream));
  e.end_s = now_s();
  d.mark_written();
  return e;
}

Event CudaDevice::do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                             std::span<const Event>) {
  auto& s = on_device(&src, *this, "copy_to_host src");
  set_current();
  std::lock_guard lock(staging_mutex_);
  Staging& st = *staging_;
  const std::size_t chunk = st.slot[0].size();
  const std::size_t chunks = (dst.size() + chunk - 1) / chunk;
  Event e;
  e.start_s = now_s();
  auto issue = [&](std::size_t c) {
    const std::size_t slot = c % 2, pos = c * chunk, len = std::min(chunk, dst.size() - pos);
    cuda_check(name(), "cudaMemcpyAsync(D2H)",
               cudaMemcpyAsync(st.slot[slot].data(), s.ptr<const std::byte>() + offset + pos, len,
                               cudaMemcpyDeviceToHost, st.stream));
    cuda_check(name(), "cudaEventRecord", cudaEventRecord(st.done[slot], st.stream));
  };
  if (chunks > 0) issue(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) issue(c + 1);  // its slot was emptied by the previous iteration
    cuda_check(name(), "cudaEventSynchronize", cudaEventSynchronize(st.done[c % 2]));
    const std::size_t pos = c * chunk, len = std::min(chunk, dst.size() - pos);
    std::memcpy(dst.data() + pos, st.slot[c % 2].data(), len);
  }
  e.end_s = now_s();
  return e;
}

bool CudaDevice::can_copy_peer(const CudaDevice& peer) const {
  if (!options_.allow_p2p || !peer.options_.allow_p2p) return false;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, ordinal_, peer.ordinal_) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return can != 0;
}

Event CudaDevice::do_copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after) {
  auto* peer = dynamic_cast<CudaDevice*>(&dst.device());
  const bool same = peer == this;
  if (!peer || (!same && !can_copy_peer(*peer))) return copy_to_peer_staged(src, dst, after);
  auto& s = on_device(&src, *this, "copy_to_peer src");
  auto& d = dynamic_cast<CudaBuffer&>(dst);
  set_current();
  if (!same) {
    std::lock_guard lock(peers_mutex_);
    if (std::find(peers_enabled_.begin(), peers_enabled_.end(), peer->ordinal()) == peers_enabled_.end()) {
      const cudaError_t rc = cudaDeviceEnablePeerAccess(peer->ordinal(), 0);
      if (rc == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        cuda_check(name(), "cudaDeviceEnablePeerAccess", rc);
      }
      peers_enabled_.push_back(peer->ordinal());
    }
  }
  std::lock_guard lock(staging_mutex_);
  Event e;
  e.start_s = now_s();
  const cudaError_t rc = same ? cudaMemcpyAsync(d.device_ptr(), s.device_ptr(), src.size_bytes(),
                                                cudaMemcpyDeviceToDevice, staging_->stream)
                              : cudaMemcpyPeerAsync(d.device_ptr(), peer->ordinal(), s.device_ptr(),
                                                    ordinal_, src.size_bytes(), staging_->stream);
  cuda_check(name(), same ? "cudaMemcpyAsync(D2D)" : "cudaMemcpyPeerAsync", rc);
  cuda_check(name(), "cudaStreamSynchronize", cudaStreamSynchronize(staging_->stream));
  e.end_s = now_s();
  d.mark_written();
  return e;
}

std::optional<EnergyReport> CudaDevice::energy() const {
  if (!nvml_) return std::nullopt;
  const auto total = nvml_->total_energy_j(pci_bus_id_);
  if (!total) return std::nullopt;
  // NVML has one counter for the board: the split by state is not observable, so it is all
  // reported as execute energy.
  EnergyReport r;
  r.execute_j = *total - energy_at_start_j_;
  return r;
}

DeviceInfo cuda_device_info(int ordinal, const std::string& name) {
  cudaDeviceProp p{};
  cuda_check(name, "cudaGetDeviceProperties", cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo info;
  info.name = name;
  info.kind = DeviceKind::gpu;
  info.backend = "cuda";
  info.model = p.name;
  info.memory_bytes = p.totalGlobalMem;
  info.time_source = TimeSource::measured;
  return info;
}

}  // namespace dype::hw
