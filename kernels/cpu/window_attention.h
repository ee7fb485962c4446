#pragma once
// Multi-head sliding-window attention (Longformer/BigBird local attention, the SWAT kernel):
// S = MASK(Q K^T) / sqrt(head_dim) restricted to the band |i - j| <= window / 2 (an SDDMM),
// row softmax, Z = S V (an SpMM). Never materialises the seq_len x seq_len matrix: memory is
// O(seq_len x window) at most, per thread O(window).
#include <cstdint>
#include <span>

namespace dype::kernels::cpu {

struct WindowAttentionDims {
  std::int64_t seq_len = 0;
  std::int64_t heads = 1;
  std::int64_t head_dim = 0;
  std::int64_t window = 0;  // token i attends to j with |i - j| <= window / 2
};

// q, k, v, out: [seq_len, heads * head_dim] row-major; head h occupies columns
// [h * head_dim, (h + 1) * head_dim) (the layout of a [seq_len, d] projection output).
// Scaled by 1 / sqrt(head_dim). window 0: each token attends to itself only; window >= 2 *
// (seq_len - 1): full attention. Multi-threaded (oneTBB, over heads x blocks of query rows) and
// vectorised for active_isa(). Throws InputError on negative sizes, heads/head_dim < 1 or
// undersized spans.
void window_attention(std::span<const float> q, std::span<const float> k,
                      std::span<const float> v, std::span<float> out,
                      const WindowAttentionDims& dims);

// Scratch one worker thread holds for these dims (packed K^T band + one score tile), in bytes:
// O(window * head_dim), independent of seq_len once seq_len exceeds the band.
std::int64_t window_attention_scratch_bytes(const WindowAttentionDims& dims);

}  // namespace dype::kernels::cpu
