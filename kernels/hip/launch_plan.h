#pragma once
// Pure planning for the HIP backend: launch geometry of the own kernels (tiled GEMM, row softmax,
// window attention), rocSPARSE SpMM descriptor arguments, staging-copy chunking, PCI address
// conversion for ROCm SMI, and the mapping of HIP / rocSPARSE / ROCm SMI status codes to what
// they mean for the caller. No HIP headers: it builds and is tested on machines without the
// toolkit; the numeric codes are checked against the real headers by static_asserts in
// hw/hip/hip_device.cpp.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/gpu/launch_plan.h"

namespace dype::kernels::hip {

using gpu::Activation;
using gpu::Grid;
using gpu::WindowDims;
using gpu::window_band;
using gpu::ErrorClass;
using gpu::format_error;

// Tiled GEMM (kernels/hip/gemm_tiling.h): grid_x row tiles, grid_y column tiles, static LDS.
// Throws InputError when a size is negative, exceeds the kernel's 32-bit indices, or the column
// tiles exceed the grid's y limit.
Grid gemm_grid(std::int64_t m, std::int64_t k, std::int64_t n);

// Row softmax over x[m x n]: one workgroup per row; wavefront-sized groups of threads up to 256
// (gfx90a wavefronts are 64 wide, RDNA ones 32).
Grid softmax_grid(std::int64_t m, std::int64_t n, int warp_size = 64);

// Sliding-window attention, fused per (query row, head) like kernels/cuda: banded SDDMM of q_i
// against its window of keys, softmax over the band, then the band-weighted sum of values.
// LDS: the band's scores, the query vector and reduction scratch. Band = 2 * (window / 2) + 1
// keys clipped to seq_len. Throws InputError when heads exceed the grid's y limit or the band
// does not fit in max_shared_bytes.
Grid window_attention_grid(const WindowDims& d, std::size_t max_shared_bytes = 64 * 1024);
// Floats of reduction scratch the softmax and attention kernels reserve (one per wavefront of a
// 256-thread workgroup at the smallest wavefront size, 32).
inline constexpr int kReduceScratch = 8;

// rocSPARSE generic SpMM, C[m x n] = A[m x k] (CSR) * B[k x n], dense operands row-major.
struct SpmmDescriptor {
  std::int64_t a_rows = 0, a_cols = 0, nnz = 0;
  int index_type = 0;         // rocsparse_indextype: 2 = i32, 3 = i64
  std::int64_t b_rows = 0, b_cols = 0, ldb = 0;
  std::int64_t c_rows = 0, c_cols = 0, ldc = 0;
  int order = 0;              // rocsparse_order_row
  int data_type = 151;        // rocsparse_datatype_f32_r
};
// Throws InputError for negative sizes, index widths other than 4 / 8 bytes, or an nnz that 32-bit
// indices cannot address.
SpmmDescriptor spmm_descriptor(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t nnz,
                               int index_bytes);

// Host copies through pinned staging memory go in chunks of at most chunk_bytes, alternating two
// slots: chunk c uses slot c % 2.
struct Chunk {
  std::size_t offset = 0, bytes = 0;
  int slot = 0;
};
std::vector<Chunk> staging_chunks(std::size_t total_bytes, std::size_t chunk_bytes);

// ROCm SMI names GPUs by a packed BDF id (domain << 32 | bus << 8 | device << 3 | function); HIP by
// the string "dddd:bb:dd.f" (hipDeviceGetPCIBusId). nullopt for a malformed string.
std::optional<std::uint64_t> pci_bus_id_to_bdfid(std::string_view bus_id);
// rsmi_dev_energy_count_get's counter in units of `resolution_uj` microjoules, in joules.
double energy_counter_to_j(std::uint64_t counter, float resolution_uj);

std::string_view to_string(ErrorClass c);

// Codes as in hip_runtime_api.h (hipError_t), rocsparse-types.h (rocsparse_status) and
// rocm_smi.h (rsmi_status_t).
ErrorClass classify_hip_error(int code);
ErrorClass classify_rocsparse_status(int code);
ErrorClass classify_rsmi_status(std::uint32_t code);
// rocSPARSE has no status-to-string function in 5.2: the enumerator's name.
std::string_view rocsparse_status_name(int code);


}  // namespace dype::kernels::hip
