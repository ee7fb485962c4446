// avx2 instantiation of the row softmax / layer norm kernels.
#define DYPE_SIMD_ISA 2
#include "kernels/cpu/norm_impl.h"

DYPE_NORM_DEFINE(avx2)
