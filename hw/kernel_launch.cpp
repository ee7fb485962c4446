#include "hw/kernel_launch.h"

#include <sstream>

#include "common/error.h"

namespace dype::hw {

using kernels::OpKind;
using kernels::Epilogue;

KernelLaunch KernelLaunch::spmm(const Buffer& indptr, const Buffer& indices, const Buffer& values,
                                const Buffer& x, Buffer& y, std::int64_t m, std::int64_t k,
                                std::int64_t n, std::int64_t nnz, int index_bytes,
                                double degree_skew) {
  KernelLaunch l;
  l.shape.kind = OpKind::spmm;
  l.shape.m = m;
  l.shape.k = k;
  l.shape.n = n;
  l.shape.nnz = nnz;
  l.shape.degree_skew = degree_skew;
  l.inputs = {&indptr, &indices, &values, &x};
  l.output = &y;
  l.index_bytes = index_bytes;
  return l;
}

KernelLaunch KernelLaunch::gemm(const Buffer& x, const Buffer& w, const Buffer* bias, Buffer& y,
                                std::int64_t m, std::int64_t k, std::int64_t n,
                                Epilogue epilogue, const Buffer* residual) {
  KernelLaunch l;
  l.shape.kind = OpKind::gemm;
  l.shape.m = m;
  l.shape.k = k;
  l.shape.n = n;
  l.inputs = {&x, &w};
  if (bias || residual) l.inputs.push_back(bias);
  if (residual) l.inputs.push_back(residual);
  l.output = &y;
  l.epilogue = epilogue;
  return l;
}

KernelLaunch KernelLaunch::window_attention(const Buffer& q, const Buffer& k, const Buffer& v,
                                            Buffer& out, std::int64_t seq_len,
                                            std::int64_t heads, std::int64_t head_dim,
                                            std::int64_t window) {
  KernelLaunch l;
  l.shape.kind = OpKind::window_attention;
  l.shape.seq_len = seq_len;
  l.shape.heads = heads;
  l.shape.head_dim = head_dim;
  l.shape.window = window;
  // m/n mirror the [seq_len x d_model] matrices so generic code can size outputs.
  l.shape.m = seq_len;
  l.shape.n = heads * head_dim;
  l.inputs = {&q, &k, &v};
  l.output = &out;
  return l;
}

KernelLaunch KernelLaunch::softmax(Buffer& x, std::int64_t rows, std::int64_t cols) {
  KernelLaunch l;
  l.shape.kind = OpKind::softmax;
  l.shape.m = rows;
  l.shape.n = cols;
  l.output = &x;
  return l;
}

KernelLaunch KernelLaunch::layer_norm(const Buffer& x, const Buffer& gamma, const Buffer& beta,
                                      Buffer& y, std::int64_t rows, std::int64_t cols, float eps) {
  KernelLaunch l;
  l.shape.kind = OpKind::layer_norm;
  l.shape.m = rows;
  l.shape.n = cols;
  l.inputs = {&x, &gamma, &beta};
  l.output = &y;
  l.eps = eps;
  return l;
}

namespace {

void need(const std::string& where, const char* arg, const Buffer* b, std::int64_t elems,
          std::size_t elem_bytes) {
  if (elems < 0) throw InputError(where, std::string(arg) + ": negative size");
  if (!b) throw InputError(where, std::string(arg) + ": buffer missing");
  const std::size_t bytes = static_cast<std::size_t>(elems) * elem_bytes;
  if (b->size_bytes() < bytes) {
    throw InputError(where, std::string(arg) + ": buffer holds " +
                                std::to_string(b->size_bytes()) + " bytes, shape needs " +
                                std::to_string(bytes));
  }
}

void need_inputs(const std::string& where, const KernelLaunch& l, std::size_t lo, std::size_t hi) {
  if (l.inputs.size() < lo || l.inputs.size() > hi) {
    throw InputError(where, std::string(to_string(l.shape.kind)) + " takes " +
                                std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi)) +
                                " input buffers, got " + std::to_string(l.inputs.size()));
  }
}

}  // namespace

void validate(const KernelLaunch& l, const std::string& where_device) {
  const std::string where = where_device + ": " + std::string(to_string(l.shape.kind));
  const auto& s = l.shape;
  switch (s.kind) {
    case OpKind::spmm: {
      need_inputs(where, l, 4, 4);
      if (l.index_bytes != 4 && l.index_bytes != 8) {
        throw InputError(where, "index_bytes must be 4 or 8, got " + std::to_string(l.index_bytes));
      }
      need(where, "indptr", l.inputs[0], s.m + 1, l.index_bytes);
      need(where, "indices", l.inputs[1], s.nnz, l.index_bytes);
      need(where, "values", l.inputs[2], s.nnz, 4);
      need(where, "x", l.inputs[3], s.k * s.n, 4);
      need(where, "y", l.output, s.m * s.n, 4);
      break;
    }
    case OpKind::gemm: {
      const bool bias = has_bias(l.epilogue), residual = has_residual(l.epilogue);
      if (residual) need_inputs(where, l, 4, 4);
      else need_inputs(where, l, bias ? 3 : 2, 3);
      need(where, "x", l.inputs[0], s.m * s.k, 4);
      need(where, "w", l.inputs[1], s.k * s.n, 4);
      if (bias) need(where, "bias", l.inputs[2], s.n, 4);
      if (residual) {
        need(where, "residual", l.inputs[3], s.m * s.n, 4);
        if (l.inputs[3] == l.output) throw InputError(where, "residual: must not be the output buffer");
      }
      need(where, "y", l.output, s.m * s.n, 4);
      break;
    }
    case OpKind::window_attention: {
      need_inputs(where, l, 3, 3);
      if (s.heads <= 0 || s.head_dim <= 0 || s.window < 0) {
        throw InputError(where, "heads and head_dim must be > 0 and window >= 0");
      }
      const std::int64_t elems = s.seq_len * s.heads * s.head_dim;
      need(where, "q", l.inputs[0], elems, 4);
      need(where, "k", l.inputs[1], elems, 4);
      need(where, "v", l.inputs[2], elems, 4);
      need(where, "out", l.output, elems, 4);
      break;
    }
    case OpKind::softmax:
      need_inputs(where, l, 0, 0);
      need(where, "x", l.output, s.m * s.n, 4);
      break;
    case OpKind::layer_norm:
      need_inputs(where, l, 3, 3);
      need(where, "x", l.inputs[0], s.m * s.n, 4);
      need(where, "gamma", l.inputs[1], s.n, 4);
      need(where, "beta", l.inputs[2], s.n, 4);
      need(where, "y", l.output, s.m * s.n, 4);
      break;
  }
}

std::string describe(const kernels::OpShape& s) {
  std::ostringstream o;
  o << to_string(s.kind);
  switch (s.kind) {
    case OpKind::spmm:
      o << " m=" << s.m << " k=" << s.k << " n=" << s.n << " nnz=" << s.nnz;
      break;
    case OpKind::gemm:
      o << " m=" << s.m << " k=" << s.k << " n=" << s.n;
      break;
    case OpKind::window_attention:
      o << " seq=" << s.seq_len << " w=" << s.window << " heads=" << s.heads
        << " dim=" << s.head_dim;
      break;
    case OpKind::softmax:
    case OpKind::layer_norm:
      o << " m=" << s.m << " n=" << s.n;
      break;
  }
  return o.str();
}

}  // namespace dype::hw
