// avx512 instantiation of the row softmax / layer norm kernels.
#define DYPE_SIMD_ISA 512
#include "kernels/cpu/norm_impl.h"

DYPE_NORM_DEFINE(avx512)
