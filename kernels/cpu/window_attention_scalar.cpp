// Baseline (scalar) instantiation of the window attention block kernel, for CPUs without AVX2.
#define DYPE_SIMD_ISA 0
#include "kernels/cpu/window_attention_impl.h"

namespace dype::kernels::cpu::detail {

void attention_block_scalar(const AttentionBlock& b) { WindowAttentionKernel<4, 4, 4, 4>::run(b); }

}  // namespace dype::kernels::cpu::detail
