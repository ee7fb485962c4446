// AVX-512 instantiation of the window attention block kernel (compiled with -mavx512*).
// Tiles: S = 6 query rows x 4 vectors (64 keys), PV = 6 rows x 4 vectors (64 of head_dim):
// 24 accumulators of the 32 zmm registers, leaving room for the loads and the broadcast.
#define DYPE_SIMD_ISA 512
#include "kernels/cpu/window_attention_impl.h"

namespace dype::kernels::cpu::detail {

void attention_block_avx512(const AttentionBlock& b) { WindowAttentionKernel<6, 4, 6, 4>::run(b); }

}  // namespace dype::kernels::cpu::detail
