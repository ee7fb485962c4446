#include "kernels/cpu/gemm.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/error.h"

// Engine: oneDNN's matmul primitive (JIT AVX-512/AVX2 brgemm kernels chosen at run time by
// oneDNN itself), with bias and ReLU fused as a bias argument and an eltwise post-op, so Y is
// written once. Threading: Debian's libdnnl uses OpenMP (libgomp). Instead of letting OpenMP start
// its own team next to oneTBB's workers (two pools oversubscribing the cores, OpenMP threads
// spinning after each call), we cut M into row blocks, run the blocks as oneTBB tasks, and make
// oneDNN single-threaded on each worker. The thread count is therefore the oneTBB arena's:
// tbb::global_control / task_arena control GEMM exactly as they control SpMM.

namespace dype::kernels::cpu {
namespace {

// Rows per task: big enough that oneDNN's per-call cost (~tens of us: memory objects, stream,
// weight packing of k x n floats) is small next to the block's rows x k x n multiply-adds, small
// enough to give each thread about kBlocksPerThread blocks to balance with.
constexpr std::int64_t kMinBlockRows = 256;
constexpr std::int64_t kMaxBlockRows = 16384;
constexpr std::int64_t kBlocksPerThread = 8;

// omp_set_num_threads() of the OpenMP runtime libdnnl is linked with. Looked up at run time
// because dype does not link OpenMP itself (libgomp is already loaded as libdnnl's dependency).
// Null when oneDNN was built with another threading runtime; then it needs no limiting.
using OmpSetNumThreads = void (*)(int);
OmpSetNumThreads omp_set_num_threads_fn() {
  static const OmpSetNumThreads fn =
      reinterpret_cast<OmpSetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}

// The OpenMP thread limit is per calling thread: set it once on every thread that runs blocks.
void make_onednn_single_threaded() {
  thread_local bool done = false;
  if (done) return;
  if (OmpSetNumThreads fn = omp_set_num_threads_fn()) fn(1);
  done = true;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
};

// Primitive creation costs tens of microseconds; GNN layers call the same few shapes again and
// again, so keep them. Executing one primitive from several threads at once is safe: each call
// brings its own scratchpad (scratchpad_mode::user).
const Prepared& prepared(std::int64_t m, std::int64_t k, std::int64_t n, Epilogue epilogue) {
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, Epilogue>;
  static std::mutex mutex;
  static std::map<Key, Prepared> cache;
  const Key key{m, k, n, epilogue};
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc src({m, k}, dt::f32, tag::ab);
  const dnnl::memory::desc wei({k, n}, dt::f32, tag::ab);
  const dnnl::memory::desc dst({m, n}, dt::f32, tag::ab);
  const bool has_bias = epilogue == Epilogue::bias || epilogue == Epilogue::bias_relu;
  const bool has_relu = epilogue == Epilogue::relu || epilogue == Epilogue::bias_relu;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (has_relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc =
      has_bias ? dnnl::matmul::desc(src, wei, dnnl::memory::desc({1, n}, dt::f32, tag::ab), dst)
               : dnnl::matmul::desc(src, wei, dst);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  auto [it, inserted] = cache.emplace(key, Prepared{dnnl::matmul(pd), pd.scratchpad_desc()});
  return it->second;
}

void run_block(const float* x, const float* w, const float* bias, float* y, std::int64_t rows,
               std::int64_t k, std::int64_t n, Epilogue epilogue) {
  make_onednn_single_threaded();
  const Prepared& p = prepared(rows, k, n, epilogue);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine& engine = cpu_engine();
  // oneDNN's memory objects take non-const handles; it only reads SRC, WEIGHTS and BIAS.
  dnnl::memory src({{rows, k}, dt::f32, tag::ab}, engine, const_cast<float*>(x));
  dnnl::memory wei({{k, n}, dt::f32, tag::ab}, engine, const_cast<float*>(w));
  dnnl::memory dst({{rows, n}, dt::f32, tag::ab}, engine, y);
  thread_local std::vector<std::uint8_t> scratch;
  if (scratch.size() < p.scratchpad.get_size()) scratch.resize(p.scratchpad.get_size());
  dnnl::memory pad(p.scratchpad, engine, scratch.data());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_WEIGHTS, wei},
                                             {DNNL_ARG_DST, dst},
                                             {DNNL_ARG_SCRATCHPAD, pad}};
  if (epilogue == Epilogue::bias || epilogue == Epilogue::bias_relu) {
    args.emplace(DNNL_ARG_BIAS,
                 dnnl::memory({{1, n}, dt::f32, tag::ab}, engine, const_cast<float*>(bias)));
  }
  dnnl::stream stream(engine);
  p.primitive.execute(stream, args);
  stream.wait();
}

void check(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
           std::span<float> y, const GemmDims& d, Epilogue epilogue) {
  if (d.m < 0 || d.k < 0 || d.n < 0) {
    throw InputError("gemm: dims", "negative m/k/n " + std::to_string(d.m) + "/" +
                                       std::to_string(d.k) + "/" + std::to_string(d.n));
  }
  auto need = [](const char* what, std::size_t have, std::int64_t want, const char* formula) {
    if (static_cast<std::int64_t>(have) < want) {
      throw InputError(std::string("gemm: ") + what, std::to_string(have) + " floats, need " +
                                                          formula + " = " + std::to_string(want));
    }
  };
  need("X", x.size(), d.m * d.k, "m * k");
  need("W", w.size(), d.k * d.n, "k * n");
  need("Y", y.size(), d.m * d.n, "m * n");
  if (epilogue == Epilogue::bias || epilogue == Epilogue::bias_relu) need("bias", bias.size(), d.n, "n");
}

}  // namespace

void gemm(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
          std::span<float> y, const GemmDims& dims, Epilogue epilogue) {
  check(x, w, bias, y, dims, epilogue);
  const std::int64_t m = dims.m, k = dims.k, n = dims.n;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty sum: Y is the epilogue applied to zeros (oneDNN rejects k = 0)
    const bool has_bias = epilogue == Epilogue::bias || epilogue == Epilogue::bias_relu;
    const bool has_relu = epilogue == Epilogue::relu || epilogue == Epilogue::bias_relu;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < n; ++c) {
        const float v = has_bias ? bias[c] : 0.0f;
        y[r * n + c] = has_relu ? std::max(v, 0.0f) : v;
      }
    }
    return;
  }
  const std::int64_t threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const std::int64_t block_rows = std::clamp((m + threads * kBlocksPerThread - 1) /
                                                 (threads * kBlocksPerThread),
                                             kMinBlockRows, kMaxBlockRows);
  const std::int64_t blocks = (m + block_rows - 1) / block_rows;
  try {
    if (blocks == 1 || threads == 1) {
      // One thread: a single call lets oneDNN pack W once for all rows.
      run_block(x.data(), w.data(), bias.data(), y.data(), m, k, n, epilogue);
      return;
    }
    tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t b) {
      const std::int64_t r0 = b * block_rows;
      const std::int64_t rows = std::min(block_rows, m - r0);
      run_block(x.data() + r0 * k, w.data(), bias.data(), y.data() + r0 * n, rows, k, n, epilogue);
    }, tbb::simple_partitioner{});
  } catch (const dnnl::error& e) {
    throw Error(std::string("gemm: oneDNN failed: ") + e.what());
  }
}

}  // namespace dype::kernels::cpu
