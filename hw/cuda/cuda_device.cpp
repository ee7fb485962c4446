#include "hw/cuda/cuda_device.h"

#include <algorithm>

#include <cublas_v2.h>
#include <cusparse.h>

#include "hw/gpu/gpu_device_impl.h"
#include "hw/gpu/spmm_plan_cache.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch_plan.h"

namespace dype::hw {

namespace kc = kernels::cuda;
using kernels::OpKind;

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

template class GpuDevice<CudaRuntime>;

namespace {

// One cached SpMM plan: the CSR and dense descriptors, the workspace and the preprocessing done by
// cusparseSpMM_preprocess.
struct SpmmPlan {
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnMatDescr_t b = nullptr, c = nullptr;
  void* workspace = nullptr;
  SpmmPlan() = default;
  SpmmPlan(const SpmmPlan&) = delete;
  SpmmPlan& operator=(const SpmmPlan&) = delete;
  ~SpmmPlan() {
    if (a) cusparseDestroySpMat(a);
    if (b) cusparseDestroyDnMat(b);
    if (c) cusparseDestroyDnMat(c);
    if (workspace) cudaFree(workspace);
  }
};

}  // namespace

struct CudaDevice::Libraries {
  cublasHandle_t blas = nullptr;
  cusparseHandle_t sparse = nullptr;
  SpmmPlanCache<SpmmPlan> plans;

  Libraries(const std::string& dev, cudaStream_t stream) {
    try {
      blas_check(dev, "cublasCreate", cublasCreate(&blas));
      blas_check(dev, "cublasSetStream", cublasSetStream(blas, stream));
      sparse_check(dev, "cusparseCreate", cusparseCreate(&sparse));
      sparse_check(dev, "cusparseSetStream", cusparseSetStream(sparse, stream));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Libraries() { release(); }
  void release() {
    plans.clear();
    if (sparse) cusparseDestroy(sparse);
    if (blas) cublasDestroy(blas);
    sparse = nullptr;
    blas = nullptr;
  }
};

CudaDevice::CudaDevice(DeviceInfo info, int ordinal, CudaOptions options)
    : GpuDevice(std::move(info), ordinal, options) {
  for (int i = 0; i < queue_count(); ++i) libraries_.push_back(std::make_unique<Libraries>(name(), queue_stream(i)));
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal());
  libraries_.clear();
}

void CudaDevice::run_spmm(int queue, cudaStream_t, const KernelLaunch& l) {
  Libraries& lib = *libraries_[static_cast<std::size_t>(queue)];
  const auto& s = l.shape;
  auto& indptr = on_device(l.inputs[0], "indptr");
  auto& indices = on_device(l.inputs[1], "indices");
  auto& values = on_device(l.inputs[2], "values");
  auto& x = on_device(l.inputs[3], "x");
  auto& y = on_device(l.output, "y");
  if (s.m == 0 || s.n == 0) return;
  const SpmmPlanKey key{indptr.id(), indptr.generation(), indices.id(), indices.generation(),
                        values.id(), values.generation(), s.m, s.k, s.n, s.nnz, l.index_bytes};
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  // ALG2 takes row-major dense operands. Measured on an H100 (bench_gpu_kernels, 100k nodes, 2M
  // nnz, 128 features): ALG2 0.272 ms uniform / 0.160 ms R-MAT against ALG3 with preprocessing
  // 0.284 / 0.237 ms; preprocessing helps only ALG1 and ALG3 (cuSPARSE SpMM docs), so none is done.
  const auto alg = CUSPARSE_SPMM_CSR_ALG2;
  SpmmPlan* p = lib.plans.find(key);
  if (p == nullptr) {
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
                 cusparseSpMM_bufferSize(lib.sparse, op, op, &alpha, plan->a, plan->b, &beta, plan->c,
                                         CUDA_R_32F, alg, &ws));
    if (ws > 0) cuda_check(name(), "cudaMalloc(spmm workspace)", cudaMalloc(&plan->workspace, ws));
    count_spmm_plan();
    p = &lib.plans.insert(key, std::move(plan));
  } else {
    // Same graph, new features: only the dense operands move.
    sparse_check(name(), "cusparseDnMatSetValues(x)", cusparseDnMatSetValues(p->b, x.device_ptr()));
    sparse_check(name(), "cusparseDnMatSetValues(y)", cusparseDnMatSetValues(p->c, y.device_ptr()));
  }
  sparse_check(name(), "cusparseSpMM",
               cusparseSpMM(lib.sparse, op, op, &alpha, p->a, p->b, &beta, p->c, CUDA_R_32F, alg, p->workspace));
}

void CudaDevice::run_gemm(int queue, cudaStream_t stream, const KernelLaunch& l) {
  Libraries& lib = *libraries_[static_cast<std::size_t>(queue)];
  const auto& s = l.shape;
  auto& x = on_device(l.inputs[0], "x");
  auto& w = on_device(l.inputs[1], "w");
  auto& y = on_device(l.output, "y");
  const float* b = kernels::has_bias(l.epilogue) ? on_device(l.inputs[2], "bias").ptr<const float>() : nullptr;
  const float* r = kernels::has_residual(l.epilogue) ? on_device(l.inputs[3], "residual").ptr<const float>() : nullptr;
  const auto act = kernels::has_relu(l.epilogue)   ? kc::Activation::relu
                   : kernels::has_gelu(l.epilogue) ? kc::Activation::gelu
                                                   : kc::Activation::none;
  if (s.m == 0 || s.n == 0) return;
  const kc::ColMajorGemm g = kc::row_major_gemm_args(s.m, s.k, s.n);
  const float alpha = 1.0f, beta = 0.0f;
  blas_check(name(), "cublasSgemm",
             cublasSgemm(lib.blas, CUBLAS_OP_N, CUBLAS_OP_N, g.rows, g.cols, g.inner, &alpha,
                         w.ptr<const float>(), g.lda, x.ptr<const float>(), g.ldb, &beta,
                         y.ptr<float>(), g.ldc));
  cuda_check(name(), "bias_act", kc::bias_act(y.ptr<float>(), b, r, s.m, s.n, act, stream));
}

void CudaDevice::run_window_attention(cudaStream_t stream, const KernelLaunch& l) {
  const auto& s = l.shape;
  const kc::WindowDims d{s.seq_len, s.heads, s.head_dim, s.window};
  cuda_check(name(), "window_attention",
             kc::window_attention(on_device(l.inputs[0], "q").ptr<const float>(),
                                  on_device(l.inputs[1], "k").ptr<const float>(),
                                  on_device(l.inputs[2], "v").ptr<const float>(),
                                  on_device(l.output, "out").ptr<float>(), d, stream, max_shared_bytes()));
}

void CudaDevice::run_layer_norm(cudaStream_t stream, const KernelLaunch& l) {
  cuda_check(name(), "layer_norm",
             kc::layer_norm(on_device(l.inputs[0], "x").ptr<const float>(), on_device(l.inputs[1], "gamma").ptr<const float>(),
                            on_device(l.inputs[2], "beta").ptr<const float>(), on_device(l.output, "y").ptr<float>(),
                            l.shape.m, l.shape.n, l.eps, stream));
}

void CudaDevice::run_softmax(cudaStream_t stream, const KernelLaunch& l) {
  cuda_check(name(), "row_softmax",
             kc::row_softmax(on_device(l.output, "x").ptr<float>(), l.shape.m, l.shape.n, stream));
}

DeviceInfo cuda_device_info(int ordinal, const std::string& name) {
  cudaDeviceProp p{};
  cuda_check(name, "cudaGetDeviceProperties", cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo info;
  info.name = name;
  info.kind = DeviceKind::gpu;
  info.backend = "cuda";
  info.product = p.name;
  info.memory_bytes = p.totalGlobalMem;
  info.time_source = TimeSource::measured;
  return info;
}

}  // namespace dype::hw
