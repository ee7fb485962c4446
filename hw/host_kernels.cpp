#include "hw/host_kernels.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/spmm.h"
#include "kernels/cpu/window_attention.h"
#include "common/error.h"

namespace dype::hw {

using kernels::OpKind;

namespace {

template <typename Index>
void run_spmm(const KernelLaunch& l) {
  const auto& s = l.shape;
  kernels::CsrView<Index> a;
  a.rows = s.m;
  a.cols = s.k;
  a.indptr = l.inputs[0]->as<Index>().first(static_cast<std::size_t>(s.m + 1));
  a.indices = l.inputs[1]->as<Index>().first(static_cast<std::size_t>(s.nnz));
  a.values = l.inputs[2]->as<float>().first(static_cast<std::size_t>(s.nnz));
  kernels::cpu::spmm(a, l.inputs[3]->as<float>(), s.n,
                     l.output->as<float>().first(static_cast<std::size_t>(s.m * s.n)));
}

}  // namespace

void run_on_host(const KernelLaunch& l) {
  const auto& s = l.shape;
  switch (s.kind) {
    case OpKind::spmm:
      if (l.index_bytes == 8) run_spmm<std::int64_t>(l);
      else run_spmm<std::int32_t>(l);
      return;
    case OpKind::gemm: {
      std::span<const float> bias, residual;
      if (l.inputs.size() > 2 && l.inputs[2]) bias = l.inputs[2]->as<float>();
      if (l.inputs.size() > 3) residual = l.inputs[3]->as<float>();
      kernels::cpu::gemm(l.inputs[0]->as<float>(), l.inputs[1]->as<float>(), bias,
                         l.output->as<float>(), {s.m, s.k, s.n}, l.epilogue, residual);
      return;
    }
    case OpKind::window_attention:
      kernels::cpu::window_attention(l.inputs[0]->as<float>(), l.inputs[1]->as<float>(),
                                     l.inputs[2]->as<float>(), l.output->as<float>(),
                                     {s.seq_len, s.heads, s.head_dim, s.window});
      return;
    case OpKind::softmax:
      kernels::cpu::softmax_rows(l.output->as<float>().first(static_cast<std::size_t>(s.m * s.n)),
                                 s.m, s.n);
      return;
    case OpKind::layer_norm:
      kernels::cpu::layer_norm_rows(l.inputs[0]->as<float>(), l.inputs[1]->as<float>(),
                                    l.inputs[2]->as<float>(), l.output->as<float>(), s.m, s.n,
                                    l.eps);
      return;
  }
  throw Error("run_on_host: unknown op");
}

}  // namespace dype::hw
