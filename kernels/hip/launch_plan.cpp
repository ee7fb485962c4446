#include "kernels/hip/launch_plan.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "common/error.h"
#include "kernels/hip/gemm_tiling.h"

namespace dype::kernels::hip {

namespace {
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kGridYMax = 65535;

int checked_int(std::int64_t v, const char* where, const char* what) {
  if (v < 0) throw InputError(where, std::string(what) + " is negative: " + std::to_string(v));
  if (v > kIntMax) {
    throw InputError(where, std::string(what) + "=" + std::to_string(v) +
                                " exceeds the kernel's 32-bit index range");
  }
  return static_cast<int>(v);
}
}  // namespace

Grid gemm_grid(std::int64_t m, std::int64_t k, std::int64_t n) {
  namespace t = gemm_tile;
  const int mi = checked_int(m, "hip gemm", "m");
  checked_int(k, "hip gemm", "k");
  const int ni = checked_int(n, "hip gemm", "n");
  // Element offsets are computed in 64 bits in the kernel; only the tile counts matter here.
  const std::int64_t row_tiles = (static_cast<std::int64_t>(mi) + t::kTileM - 1) / t::kTileM;
  const std::int64_t col_tiles = (static_cast<std::int64_t>(ni) + t::kTileN - 1) / t::kTileN;
  if (col_tiles > kGridYMax) {
    throw InputError("hip gemm", "n=" + std::to_string(n) + " needs " + std::to_string(col_tiles) +
                                     " column tiles, above the grid's y limit 65535");
  }
  Grid g;
  g.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, row_tiles));
  g.grid_y = static_cast<unsigned>(std::max<std::int64_t>(1, col_tiles));
  g.block = t::kThreads;
  g.shared_bytes = 0;  // the tiles are static __shared__ arrays
  return g;
}

Grid softmax_grid(std::int64_t m, std::int64_t n, int warp_size) {
  if (m > kIntMax) throw InputError("hip softmax", "too many rows: " + std::to_string(m));
  if (warp_size != 32 && warp_size != 64) {
    throw InputError("hip softmax", "wavefront size must be 32 or 64, got " + std::to_string(warp_size));
  }
  Grid g;
  g.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, m));
  // A wavefront per warp_size columns up to 256 threads: short rows leave no idle wavefronts.
  const std::int64_t waves = std::clamp<std::int64_t>((n + warp_size - 1) / warp_size, 1, 256 / warp_size);
  g.block = static_cast<unsigned>(waves * warp_size);
  g.shared_bytes = 2 * kReduceScratch * sizeof(float);  // partial max and partial sum per wavefront
  return g;
}


Grid window_attention_grid(const WindowDims& d, std::size_t max_shared_bytes) {
  if (d.seq_len < 0 || d.heads < 1 || d.head_dim < 1 || d.window < 0) {
    throw InputError("hip window_attention", "need seq_len >= 0, heads >= 1, head_dim >= 1, window >= 0");
  }
  if (d.heads > kGridYMax) {
    throw InputError("hip window_attention", "heads=" + std::to_string(d.heads) + " exceeds the grid y limit 65535");
  }
  if (d.seq_len > kIntMax || d.heads * d.head_dim > kIntMax) {
    throw InputError("hip window_attention", "seq_len or heads * head_dim exceeds the kernel's 32-bit indices");
  }
  Grid g;
  g.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, d.seq_len));
  g.grid_y = static_cast<unsigned>(d.heads);
  g.block = 256;  // 4 wavefronts of 64 on CDNA: each scores one key at a time, lanes over head_dim
  const std::int64_t band = window_band(d.seq_len, d.window);
  g.shared_bytes = static_cast<std::size_t>(band + d.head_dim + kReduceScratch) * sizeof(float);
  if (g.shared_bytes > max_shared_bytes) {
    throw InputError("hip window_attention",
                     "window=" + std::to_string(d.window) + " with head_dim=" + std::to_string(d.head_dim) +
                         " needs " + std::to_string(g.shared_bytes) + " bytes of LDS, limit " +
                         std::to_string(max_shared_bytes));
  }
  return g;
}

SpmmDescriptor spmm_descriptor(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t nnz,
                               int index_bytes) {
  if (m < 0 || k < 0 || n < 0 || nnz < 0) {
    throw InputError("hip spmm", "sizes must be >= 0 (m=" + std::to_string(m) + ", k=" + std::to_string(k) +
                                     ", n=" + std::to_string(n) + ", nnz=" + std::to_string(nnz) + ")");
  }
  if (index_bytes != 4 && index_bytes != 8) {
    throw InputError("hip spmm", "index_bytes must be 4 or 8, got " + std::to_string(index_bytes));
  }
  if (index_bytes == 4 && (nnz > kIntMax || m > kIntMax || k > kIntMax)) {
    throw InputError("hip spmm", "nnz=" + std::to_string(nnz) + " (or m, k) does not fit 32-bit CSR indices");
  }
  SpmmDescriptor s;
  s.a_rows = m;
  s.a_cols = k;
  s.nnz = nnz;
  s.index_type = index_bytes == 8 ? 3 : 2;
  // Row-major: the leading dimension is the row length; rocSPARSE wants >= 1 even when n is 0.
  s.b_rows = k;
  s.b_cols = n;
  s.ldb = std::max<std::int64_t>(1, n);
  s.c_rows = m;
  s.c_cols = n;
  s.ldc = std::max<std::int64_t>(1, n);
  s.order = 0;
  s.data_type = 151;
  return s;
}

std::vector<Chunk> staging_chunks(std::size_t total_bytes, std::size_t chunk_bytes) {
  if (chunk_bytes == 0) throw InputError("hip staging", "chunk_bytes must be > 0");
  std::vector<Chunk> out;
  out.reserve(total_bytes / chunk_bytes + 1);
  for (std::size_t pos = 0, c = 0; pos < total_bytes; pos += chunk_bytes, ++c) {
    out.push_back({pos, std::min(chunk_bytes, total_bytes - pos), static_cast<int>(c % 2)});
  }
  return out;
}

std::optional<std::uint64_t> pci_bus_id_to_bdfid(std::string_view s) {
  // "dddd:bb:dd.f" (domain may have more hex digits on some systems).
  const auto c1 = s.find(':');
  const auto c2 = s.find(':', c1 == std::string_view::npos ? c1 : c1 + 1);
  const auto dot = s.find('.', c2 == std::string_view::npos ? c2 : c2 + 1);
  if (c1 == std::string_view::npos || c2 == std::string_view::npos || dot == std::string_view::npos) {
    return std::nullopt;
  }
  auto hex = [](std::string_view part, std::uint64_t max) -> std::optional<std::uint64_t> {
    std::uint64_t v = 0;
    if (part.empty()) return std::nullopt;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v, 16);
    if (r.ec != std::errc() || r.ptr != part.data() + part.size() || v > max) return std::nullopt;
    return v;
  };
  const auto domain = hex(s.substr(0, c1), 0xffffffffULL);
  const auto bus = hex(s.substr(c1 + 1, c2 - c1 - 1), 0xff);
  const auto dev = hex(s.substr(c2 + 1, dot - c2 - 1), 0x1f);
  const auto fn = hex(s.substr(dot + 1), 0x7);
  if (!domain || !bus || !dev || !fn) return std::nullopt;
  return (*domain << 32) | (*bus << 8) | (*dev << 3) | *fn;
}

double energy_counter_to_j(std::uint64_t counter, float resolution_uj) {
  return static_cast<double>(counter) * static_cast<double>(resolution_uj) * 1e-6;
}

std::string_view to_string(ErrorClass c) {
  switch (c) {
    case ErrorClass::no_device: return "no device";
    case ErrorClass::out_of_memory: return "out of memory";
    case ErrorClass::invalid_argument: return "invalid argument";
    case ErrorClass::unsupported: return "unsupported";
    case ErrorClass::fatal: return "fatal";
  }
  return "unknown";
}

ErrorClass classify_hip_error(int code) {
  switch (code) {
    case 3:    // hipErrorNotInitialized
    case 35:   // hipErrorInsufficientDriver
    case 100:  // hipErrorNoDevice
    case 101:  // hipErrorInvalidDevice
      return ErrorClass::no_device;
    case 2: return ErrorClass::out_of_memory;  // hipErrorOutOfMemory
    case 1:    // hipErrorInvalidValue
    case 9:    // hipErrorInvalidConfiguration
    case 17:   // hipErrorInvalidDevicePointer
    case 21:   // hipErrorInvalidMemcpyDirection
      return ErrorClass::invalid_argument;
    case 209:  // hipErrorNoBinaryForGpu (built for DYPE_HIP_ARCHS only)
    case 217:  // hipErrorPeerAccessUnsupported
    case 801:  // hipErrorNotSupported
      return ErrorClass::unsupported;
    default: return ErrorClass::fatal;
  }
}

ErrorClass classify_rocsparse_status(int code) {
  switch (code) {
    case 1: return ErrorClass::no_device;  // rocsparse_status_invalid_handle: no handle without a GPU
    case 5: return ErrorClass::out_of_memory;  // rocsparse_status_memory_error
    case 3:   // rocsparse_status_invalid_pointer
    case 4:   // rocsparse_status_invalid_size
    case 7:   // rocsparse_status_invalid_value
    case 10:  // rocsparse_status_not_initialized (descriptor)
    case 11:  // rocsparse_status_type_mismatch
    case 12:  // rocsparse_status_requires_sorted_storage
      return ErrorClass::invalid_argument;
    case 2:  // rocsparse_status_not_implemented
    case 8:  // rocsparse_status_arch_mismatch
      return ErrorClass::unsupported;
    default: return ErrorClass::fatal;  // internal error, zero pivot
  }
}

ErrorClass classify_rsmi_status(std::uint32_t code) {
  switch (code) {
    case 3:   // RSMI_STATUS_FILE_ERROR: the sysfs files of the driver are missing
    case 8:   // RSMI_STATUS_INIT_ERROR
    case 10:  // RSMI_STATUS_NOT_FOUND
      return ErrorClass::no_device;
    case 5: return ErrorClass::out_of_memory;  // RSMI_STATUS_OUT_OF_RESOURCES
    case 1:  // RSMI_STATUS_INVALID_ARGS
    case 7:  // RSMI_STATUS_INPUT_OUT_OF_BOUNDS
      return ErrorClass::invalid_argument;
    case 2:  // RSMI_STATUS_NOT_SUPPORTED
    case 4:  // RSMI_STATUS_PERMISSION
    case 9:  // RSMI_STATUS_NOT_YET_IMPLEMENTED
      return ErrorClass::unsupported;
    default: return ErrorClass::fatal;
  }
}

std::string_view rocsparse_status_name(int code) {
  static constexpr std::string_view names[] = {
      "rocsparse_status_success",         "rocsparse_status_invalid_handle",
      "rocsparse_status_not_implemented", "rocsparse_status_invalid_pointer",
      "rocsparse_status_invalid_size",    "rocsparse_status_memory_error",
      "rocsparse_status_internal_error",  "rocsparse_status_invalid_value",
      "rocsparse_status_arch_mismatch",   "rocsparse_status_zero_pivot",
      "rocsparse_status_not_initialized", "rocsparse_status_type_mismatch",
      "rocsparse_status_requires_sorted_storage"};
  if (code < 0 || code >= static_cast<int>(std::size(names))) return "rocsparse_status_unknown";
  return names[code];
}


}  // namespace dype::kernels::hip
