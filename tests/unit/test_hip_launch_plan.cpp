// Pure planning of the HIP backend (kernels/hip/launch_plan.h, kernels/hip/gemm_tiling.h): runs on
// every machine, with or without the ROCm toolchain.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/hip/gemm_tiling.h"
#include "kernels/hip/launch_plan.h"

namespace kh = dype::kernels::hip;
namespace tile = dype::kernels::hip::gemm_tile;

namespace {

// Runs the tiled GEMM kernel's schedule on the CPU: every workgroup of the grid, every thread,
// the same staging loads, LDS tiles, micro-tile accumulation order and fused epilogue, through the
// same index functions the device code uses. Counts how often each LDS slot and each output
// element is written, so gaps and overlaps in the index math show up.
struct Emulated {
  std::vector<float> y;
  std::vector<int> writes;  // per output element
  int lds_a_misses = 0, lds_b_misses = 0;  // tile slots written != once per step
};

Emulated emulate_tiled_gemm(const std::vector<float>& x, const std::vector<float>& w,
                            const std::vector<float>* bias, int m, int k, int n, bool relu) {
  const kh::Grid g = kh::gemm_grid(m, k, n);
  Emulated out;
  out.y.assign(static_cast<std::size_t>(m) * n, -12345.0f);
  out.writes.assign(out.y.size(), 0);
  float xs[tile::kTileM][tile::kTileK + tile::kPadA];
  float ws[tile::kTileK][tile::kTileN];
  for (unsigned bx = 0; bx < g.grid_x; ++bx) {
    for (unsigned by = 0; by < g.grid_y; ++by) {
      const int row0 = static_cast<int>(bx) * tile::kTileM, col0 = static_cast<int>(by) * tile::kTileN;
      std::vector<std::array<std::array<float, tile::kMicroN>, tile::kMicroM>> acc(tile::kThreads);
      for (auto& a : acc)
        for (auto& r : a) r.fill(0.0f);
      for (int k0 = 0; k0 < k; k0 += tile::kTileK) {
        int a_hits[tile::kTileM][tile::kTileK] = {}, b_hits[tile::kTileK][tile::kTileN] = {};
        for (int t = 0; t < tile::kThreads; ++t) {
          for (int l = 0; l < tile::kLoadsA; ++l) {
            const auto p = tile::a_tile_load(t, l);
            const int r = row0 + p.row, c = k0 + p.col;
            xs[p.row][p.col] = (r < m && c < k) ? x[static_cast<std::size_t>(r) * k + c] : 0.0f;
            ++a_hits[p.row][p.col];
          }
          for (int l = 0; l < tile::kLoadsB; ++l) {
            const auto p = tile::b_tile_load(t, l);
            const int r = k0 + p.row, c = col0 + p.col;
            ws[p.row][p.col] = (r < k && c < n) ? w[static_cast<std::size_t>(r) * n + c] : 0.0f;
            ++b_hits[p.row][p.col];
          }
        }
        for (auto& row : a_hits)
          for (int h : row) out.lds_a_misses += h != 1;
        for (auto& row : b_hits)
          for (int h : row) out.lds_b_misses += h != 1;
        for (int t = 0; t < tile::kThreads; ++t)
          for (int kk = 0; kk < tile::kTileK; ++kk)
            for (int i = 0; i < tile::kMicroM; ++i)
              for (int j = 0; j < tile::kMicroN; ++j) {
                const float a = xs[tile::out_element(t, i, 0).row][kk];
                const float b = ws[kk][tile::out_element(t, 0, j).col];
                acc[t][i][j] = std::fma(a, b, acc[t][i][j]);
              }
      }
      for (int t = 0; t < tile::kThreads; ++t)
        for (int i = 0; i < tile::kMicroM; ++i)
          for (int j = 0; j < tile::kMicroN; ++j) {
            const auto p = tile::out_element(t, i, j);
            const int r = row0 + p.row, c = col0 + p.col;
            if (r >= m || c >= n) continue;
            float v = acc[t][i][j];
            if (bias) v += (*bias)[c];
            if (relu) v = std::max(v, 0.0f);
            const std::size_t o = static_cast<std::size_t>(r) * n + c;
            out.y[o] = v;
            ++out.writes[o];
          }
    }
  }
  return out;
}

std::vector<float> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST(HipLaunchPlan, TilingConstantsAreConsistent) {
  EXPECT_EQ(tile::kThreads, 256);
  EXPECT_EQ(tile::kMicroM * tile::kThreadsY, tile::kTileM);
  EXPECT_EQ(tile::kMicroN * tile::kThreadsX, tile::kTileN);
  // Neighbouring threads write neighbouring columns (coalesced stores) and stage neighbouring
  // elements of a row (coalesced loads).
  EXPECT_EQ(tile::out_element(1, 0, 0).col, tile::out_element(0, 0, 0).col + 1);
  EXPECT_EQ(tile::b_tile_load(1, 0).col, tile::b_tile_load(0, 0).col + 1);
  EXPECT_EQ(tile::a_tile_load(1, 0).col, tile::a_tile_load(0, 0).col + 1);
}

TEST(HipLaunchPlan, TiledGemmScheduleMatchesPlainGemmOnRaggedShapes) {
  // Shapes that are not multiples of any tile size, a single row/column, k < kTileK, and an
  // exact multiple.
  const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {65, 17, 63}, {130, 33, 129}, {64, 16, 64}, {7, 200, 3}};
  unsigned seed = 1;
  for (const auto& s : shapes) {
    const int m = s[0], k = s[1], n = s[2];
    const auto x = random_vec(static_cast<std::size_t>(m) * k, seed++);
    const auto w = random_vec(static_cast<std::size_t>(k) * n, seed++);
    const auto bias = random_vec(static_cast<std::size_t>(n), seed++);
    for (int variant = 0; variant < 2; ++variant) {
      const bool with_bias = variant == 1, relu = variant == 1;
      const auto e = emulate_tiled_gemm(x, w, with_bias ? &bias : nullptr, m, k, n, relu);
      EXPECT_EQ(e.lds_a_misses, 0) << m << "x" << k << "x" << n;
      EXPECT_EQ(e.lds_b_misses, 0) << m << "x" << k << "x" << n;
      for (int r = 0; r < m; ++r)
        for (int c = 0; c < n; ++c) {
          double ref = with_bias ? bias[c] : 0.0;
          for (int p = 0; p < k; ++p) ref += static_cast<double>(x[r * k + p]) * w[p * n + c];
          if (relu) ref = std::max(ref, 0.0);
          const std::size_t o = static_cast<std::size_t>(r) * n + c;
          ASSERT_EQ(e.writes[o], 1) << "element (" << r << "," << c << ") of " << m << "x" << k << "x" << n;
          ASSERT_NEAR(e.y[o], ref, 1e-4 * (1 + k)) << r << "," << c;
        }
    }
  }
}

TEST(HipLaunchPlan, GemmGrid) {
  const auto g = kh::gemm_grid(1000, 64, 130);
  EXPECT_EQ(g.grid_x, 16u);  // ceil(1000 / 64) row tiles
  EXPECT_EQ(g.grid_y, 3u);   // ceil(130 / 64) column tiles
  EXPECT_EQ(g.block, 256u);
  // Rows go to grid x, which holds millions of tiles (2.4M-node graphs).
  EXPECT_EQ(kh::gemm_grid(2'449'029, 100, 47).grid_x, 38267u);
  EXPECT_EQ(kh::gemm_grid(0, 0, 0).grid_x, 1u);
  EXPECT_THROW(kh::gemm_grid(-1, 4, 4), dype::InputError);
  EXPECT_THROW(kh::gemm_grid(4, 1LL << 31, 4), dype::InputError);
  EXPECT_THROW(kh::gemm_grid(4, 4, 65536LL * 64 + 1), dype::InputError);  // column tiles > 65535
  try {
    kh::gemm_grid(4, -3, 4);
    FAIL();
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("k is negative"), std::string::npos) << e.what();
  }
}

TEST(HipLaunchPlan, SoftmaxGridFollowsWavefrontSize) {
  EXPECT_EQ(kh::softmax_grid(7, 1000, 64).block, 256u);
  EXPECT_EQ(kh::softmax_grid(7, 10, 64).block, 64u);  // one CDNA wavefront
  EXPECT_EQ(kh::softmax_grid(7, 10, 32).block, 32u);  // one RDNA wavefront
  EXPECT_EQ(kh::softmax_grid(7, 100, 32).block, 128u);
  EXPECT_EQ(kh::softmax_grid(7, 100, 64).grid_x, 7u);
  // The scratch holds one partial per wavefront for two reductions.
  EXPECT_GE(kh::softmax_grid(1, 1 << 20, 32).shared_bytes, 2 * (256 / 32) * sizeof(float));
  EXPECT_THROW(kh::softmax_grid(7, 10, 16), dype::InputError);
}

TEST(HipLaunchPlan, WindowBandAndLds) {
  EXPECT_EQ(kh::window_band(100, 0), 1);
  EXPECT_EQ(kh::window_band(100, 8), 9);  // |i - j| <= 4
  EXPECT_EQ(kh::window_band(100, 9), 9);  // window / 2 rounds down, as on the CPU
  EXPECT_EQ(kh::window_band(5, 100), 5);  // clipped to seq_len
  const auto g = kh::window_attention_grid({1024, 12, 64, 256});
  EXPECT_EQ(g.grid_x, 1024u);
  EXPECT_EQ(g.grid_y, 12u);
  EXPECT_EQ(g.block % 64, 0u);  // whole wavefronts
  EXPECT_LE(g.block / 32, static_cast<unsigned>(kh::kReduceScratch));
  EXPECT_EQ(g.shared_bytes, (257 + 64 + kh::kReduceScratch) * sizeof(float));
  // MI210's 64 KiB of LDS per workgroup holds a band of about 16k keys at head_dim 64.
  EXPECT_NO_THROW(kh::window_attention_grid({1 << 20, 1, 64, 16000}, 64 * 1024));
  EXPECT_THROW(kh::window_attention_grid({1 << 20, 1, 64, 1 << 16}, 64 * 1024), dype::InputError);
  EXPECT_THROW(kh::window_attention_grid({16, 70000, 64, 4}), dype::InputError);
  EXPECT_THROW(kh::window_attention_grid({16, 1, 0, 4}), dype::InputError);
}

TEST(HipLaunchPlan, SpmmDescriptorRowMajor) {
  const auto d = kh::spmm_descriptor(300, 200, 32, 1500, 4);
  EXPECT_EQ(d.a_rows, 300);
  EXPECT_EQ(d.a_cols, 200);
  EXPECT_EQ(d.nnz, 1500);
  EXPECT_EQ(d.index_type, 2);  // rocsparse_indextype_i32
  EXPECT_EQ(d.b_rows, 200);
  EXPECT_EQ(d.b_cols, 32);
  EXPECT_EQ(d.ldb, 32);  // row-major: leading dimension = row length
  EXPECT_EQ(d.c_rows, 300);
  EXPECT_EQ(d.ldc, 32);
  EXPECT_EQ(d.order, 0);  // rocsparse_order_row
  EXPECT_EQ(kh::spmm_descriptor(3, 3, 0, 0, 8).index_type, 3);
  EXPECT_EQ(kh::spmm_descriptor(3, 3, 0, 0, 8).ldb, 1);  // never 0
  EXPECT_THROW(kh::spmm_descriptor(3, 3, 3, 1LL << 31, 4), dype::InputError);
  EXPECT_NO_THROW(kh::spmm_descriptor(3, 3, 3, 1LL << 31, 8));
  EXPECT_THROW(kh::spmm_descriptor(3, 3, 3, 3, 2), dype::InputError);
  EXPECT_THROW(kh::spmm_descriptor(-1, 3, 3, 3, 4), dype::InputError);
}

TEST(HipLaunchPlan, StagingChunksCoverTheCopyAlternatingSlots) {
  const std::size_t chunk = 8 << 20, total = (20u << 20) + 17;
  const auto c = kh::staging_chunks(total, chunk);
  ASSERT_EQ(c.size(), 3u);
  std::size_t pos = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].offset, pos);
    EXPECT_EQ(c[i].slot, static_cast<int>(i % 2));
    EXPECT_LE(c[i].bytes, chunk);
    pos += c[i].bytes;
  }
  EXPECT_EQ(pos, total);
  EXPECT_EQ(c.back().bytes, (4u << 20) + 17);
  EXPECT_TRUE(kh::staging_chunks(0, chunk).empty());
  EXPECT_EQ(kh::staging_chunks(chunk, chunk).size(), 1u);
  EXPECT_THROW(kh::staging_chunks(10, 0), dype::InputError);
}

TEST(HipLaunchPlan, PciBusIdToSmiBdfid) {
  // domain << 32 | bus << 8 | device << 3 | function (rocm_smi.h, rsmi_dev_pci_id_get)
  EXPECT_EQ(kh::pci_bus_id_to_bdfid("0000:c3:00.0"), std::optional<std::uint64_t>(0xc3ULL << 8));
  EXPECT_EQ(kh::pci_bus_id_to_bdfid("0001:03:1f.7"),
            std::optional<std::uint64_t>((1ULL << 32) | (0x03ULL << 8) | (0x1fULL << 3) | 7));
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid(""));
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid("0000:c3:00"));
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid("0000:c3:20.0"));   // device is 5 bits
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid("0000:1c3:00.0"));  // bus is 8 bits
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid("0000:c3:00.8"));   // function is 3 bits
  EXPECT_FALSE(kh::pci_bus_id_to_bdfid("zz:c3:00.0"));
  // 15.3 uJ per count (MI200's reported resolution), 1e6 counts = 15.3 J.
  EXPECT_NEAR(kh::energy_counter_to_j(1'000'000, 15.3f), 15.3, 1e-5);
}

TEST(HipLaunchPlan, ErrorMapping) {
  using C = kh::ErrorClass;
  EXPECT_EQ(kh::classify_hip_error(100), C::no_device);  // hipErrorNoDevice (this machine)
  EXPECT_EQ(kh::classify_hip_error(35), C::no_device);   // insufficient driver
  EXPECT_EQ(kh::classify_hip_error(2), C::out_of_memory);
  EXPECT_EQ(kh::classify_hip_error(1), C::invalid_argument);
  EXPECT_EQ(kh::classify_hip_error(209), C::unsupported);  // no gfx image for this GPU
  EXPECT_EQ(kh::classify_hip_error(700), C::fatal);        // illegal address
  EXPECT_EQ(kh::classify_rocsparse_status(5), C::out_of_memory);
  EXPECT_EQ(kh::classify_rocsparse_status(4), C::invalid_argument);
  EXPECT_EQ(kh::classify_rocsparse_status(2), C::unsupported);
  EXPECT_EQ(kh::classify_rocsparse_status(6), C::fatal);
  EXPECT_EQ(kh::classify_rsmi_status(8), C::no_device);  // RSMI_STATUS_INIT_ERROR
  EXPECT_EQ(kh::classify_rsmi_status(2), C::unsupported);
  EXPECT_EQ(kh::rocsparse_status_name(5), "rocsparse_status_memory_error");
  EXPECT_EQ(kh::rocsparse_status_name(99), "rocsparse_status_unknown");
  EXPECT_EQ(kh::to_string(C::no_device), "no device");
  EXPECT_EQ(kh::format_error("gpu0", "hipMalloc", 2, "hipErrorOutOfMemory", "out of memory"),
            "gpu0: hipMalloc failed: hipErrorOutOfMemory (2): out of memory");
  EXPECT_EQ(kh::format_error("gpu0", "rocsparse_spmm", 4, "rocsparse_status_invalid_size", ""),
            "gpu0: rocsparse_spmm failed: rocsparse_status_invalid_size (4)");
}
