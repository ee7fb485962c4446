#pragma once
// Index math of the HIP backend's tiled FP32 GEMM (kernels/hip/kernels.hip), shared verbatim by the
// device kernel and by the host-side emulation in the tests: the functions are constexpr, which
// clang's HIP mode treats as callable from both host and device code.
//
// Row-major Y[m x n] = X[m x k] W[k x n] (+ bias[n], ReLU). One workgroup of kThreads threads
// computes a kTileM x kTileN block of Y; blockIdx.x walks row tiles (the large dimension of GNN
// feature matrices: grid x allows 2^31 - 1 blocks, y only 65535), blockIdx.y column tiles. Per
// step over k the workgroup stages a kTileM x kTileK slice of X and a kTileK x kTileN slice of W
// in LDS (zero-filled past the matrix edges), then each thread accumulates a kMicroM x kMicroN
// micro-tile in registers.
namespace dype::kernels::hip::gemm_tile {

inline constexpr int kTileM = 64;
inline constexpr int kTileN = 64;
inline constexpr int kTileK = 16;
inline constexpr int kThreadsX = 16;  // threads along n
inline constexpr int kThreadsY = 16;  // threads along m
inline constexpr int kThreads = kThreadsX * kThreadsY;
inline constexpr int kMicroM = kTileM / kThreadsY;
inline constexpr int kMicroN = kTileN / kThreadsX;
inline constexpr int kLoadsA = kTileM * kTileK / kThreads;  // X elements each thread stages
inline constexpr int kLoadsB = kTileK * kTileN / kThreads;  // W elements each thread stages
// LDS row padding of the X tile: rows of kTileK floats would put a column in one bank.
inline constexpr int kPadA = 1;

static_assert(kTileM % kThreadsY == 0 && kTileN % kThreadsX == 0, "micro-tiles must tile the block");
static_assert(kTileM * kTileK % kThreads == 0 && kTileK * kTileN % kThreads == 0,
              "every thread stages the same number of elements");

struct RowCol {
  int row = 0;
  int col = 0;
};

// Load l of thread t into the X tile: consecutive threads read consecutive k of a row (coalesced).
constexpr RowCol a_tile_load(int t, int l) {
  const int i = t + l * kThreads;
  return {i / kTileK, i % kTileK};
}
// Load l of thread t into the W tile: consecutive threads read consecutive columns (coalesced).
constexpr RowCol b_tile_load(int t, int l) {
  const int i = t + l * kThreads;
  return {i / kTileN, i % kTileN};
}
// Element (i, j) of thread t's micro-tile, within the block tile. Rows and columns are strided by
// the thread grid so that neighbouring threads write neighbouring columns of Y (coalesced stores)
// and read distinct LDS banks of the W tile.
constexpr RowCol out_element(int t, int i, int j) {
  return {t / kThreadsX + i * kThreadsY, t % kThreadsX + j * kThreadsX};
}

}  // namespace dype::kernels::hip::gemm_tile
