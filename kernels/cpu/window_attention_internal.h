#pragma once
// Internal: the unit of work the window-attention dispatcher (window_attention.cpp) hands to the
// per-ISA kernels (window_attention_{scalar,avx2,avx512}.cpp), and the scratch they need.
#include <cstdint>

namespace dype::kernels::cpu::detail {

// One head, query rows [row_begin, row_end). The kernel packs K^T for the block's union key band
// [row_begin - half, row_end + half] into scratch once, then walks the rows in micro-tiles:
// S tile = Q_tile K_band^T (dense GEMM tile over the tile's union band), masked row softmax,
// out_tile = P_tile V_band.
struct AttentionBlock {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  std::int64_t seq_len = 0;
  std::int64_t ld = 0;        // row stride of q, k, v, out in floats (heads * head_dim)
  std::int64_t head_dim = 0;
  std::int64_t half = 0;      // window / 2: row i sees keys [i - half, i + half]
  std::int64_t col0 = 0;      // first column of this head (head * head_dim)
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  float scale = 1.0f;         // 1 / sqrt(head_dim)
  float* scratch = nullptr;   // attention_scratch_floats(...) floats, owned by the calling thread
};

// Largest micro-tile of query rows any variant uses; sizes the S tile in scratch.
inline constexpr std::int64_t kAttentionMaxTileRows = 8;
// Key bands are padded to this many columns so every variant can use whole vectors.
inline constexpr std::int64_t kAttentionColumnPad = 16;

inline std::int64_t attention_band_ld(std::int64_t block_rows, std::int64_t half,
                                      std::int64_t seq_len) {
  std::int64_t band = block_rows + 2 * half;
  if (band > seq_len) band = seq_len;
  return (band + kAttentionColumnPad - 1) / kAttentionColumnPad * kAttentionColumnPad;
}

// Scratch for one block of block_rows rows: K^T band [head_dim x ld] + S tile [8 x ld].
inline std::int64_t attention_scratch_floats(std::int64_t block_rows, std::int64_t half,
                                             std::int64_t seq_len, std::int64_t head_dim) {
  const std::int64_t ld = attention_band_ld(block_rows, half, seq_len);
  return ld * (head_dim + kAttentionMaxTileRows) + kAttentionMaxTileRows;
}

void attention_block_scalar(const AttentionBlock& b);
void attention_block_avx2(const AttentionBlock& b);
void attention_block_avx512(const AttentionBlock& b);

}  // namespace dype::kernels::cpu::detail
