// scalar instantiation of the row softmax / layer norm kernels.
#define DYPE_SIMD_ISA 0
#include "kernels/cpu/norm_impl.h"

DYPE_NORM_DEFINE(scalar)
