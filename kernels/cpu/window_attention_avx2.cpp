// AVX2 instantiation of the window attention block kernel (compiled with -mavx2 -mfma).
// 16 ymm registers: S tile 4 rows x 3 vectors (12 accumulators), PV tile 4 rows x 2 vectors.
#define DYPE_SIMD_ISA 2
#include "kernels/cpu/window_attention_impl.h"

namespace dype::kernels::cpu::detail {

void attention_block_avx2(const AttentionBlock& b) { WindowAttentionKernel<4, 3, 4, 2>::run(b); }

}  // namespace dype::kernels::cpu::detail
