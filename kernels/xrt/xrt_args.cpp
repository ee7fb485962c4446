#include "kernels/xrt/xrt_args.h"

#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace dype::kernels::xrt {

namespace {
struct Name {
  Source s;
  std::string_view n;
};
constexpr std::array kNames{
    Name{Source::indptr, "indptr"}, Name{Source::indices, "indices"}, Name{Source::values, "values"},
    Name{Source::x, "x"},           Name{Source::y, "y"},             Name{Source::q, "q"},
    Name{Source::k, "k"},           Name{Source::v, "v"},             Name{Source::out, "out"},
    Name{Source::m, "m"},           Name{Source::k_dim, "k_dim"},     Name{Source::n, "n"},
    Name{Source::nnz, "nnz"},       Name{Source::seq_len, "seq_len"}, Name{Source::heads, "heads"},
    Name{Source::head_dim, "head_dim"}, Name{Source::window, "window"},
    Name{Source::constant, "const"},
};

// The op's buffers in KernelLaunch order (inputs, then output).
std::vector<Source> buffers_of(OpKind op) {
  switch (op) {
    case OpKind::spmm: return {Source::indptr, Source::indices, Source::values, Source::x, Source::y};
    case OpKind::window_attention: return {Source::q, Source::k, Source::v, Source::out};
    default: return {};
  }
}
bool scalar_of(OpKind op, Source s) {
  if (s == Source::constant) return true;
  if (op == OpKind::spmm) return s == Source::m || s == Source::k_dim || s == Source::n || s == Source::nnz;
  if (op == OpKind::window_attention) {
    return s == Source::seq_len || s == Source::heads || s == Source::head_dim || s == Source::window;
  }
  return false;
}
}  // namespace

std::optional<Source> source_from_string(std::string_view s) {
  for (const auto& n : kNames) {
    if (n.n == s) return n.s;
  }
  return std::nullopt;
}

std::string_view to_string(Source s) {
  for (const auto& n : kNames) {
    if (n.s == s) return n.n;
  }
  return "?";
}

std::optional<ScalarType> scalar_type_from_string(std::string_view s) {
  if (s == "u32") return ScalarType::u32;
  if (s == "i32") return ScalarType::i32;
  if (s == "u64") return ScalarType::u64;
  if (s == "f32") return ScalarType::f32;
  return std::nullopt;
}

bool is_buffer(Source s) { return s <= Source::out; }

void validate_signature(const KernelSignature& sig, OpKind op, const std::string& where) {
  if (sig.kernel.empty()) throw InputError(where, "kernel name is empty");
  const auto bufs = buffers_of(op);
  if (bufs.empty()) throw InputError(where, "no FPGA launcher for op " + std::string(to_string(op)));
  std::vector<int> bound(bufs.size(), 0);
  for (std::size_t i = 0; i < sig.args.size(); ++i) {
    const auto& a = sig.args[i];
    const std::string at = where + ".args[" + std::to_string(i) + "]";
    if (is_buffer(a.source)) {
      bool found = false;
      for (std::size_t b = 0; b < bufs.size(); ++b) {
        if (bufs[b] == a.source) {
          ++bound[b];
          found = true;
        }
      }
      if (!found) throw InputError(at, "buffer '" + std::string(to_string(a.source)) + "' is not an operand of " + std::string(to_string(op)));
    } else if (!scalar_of(op, a.source)) {
      throw InputError(at, "'" + std::string(to_string(a.source)) + "' is not a shape field of " + std::string(to_string(op)));
    }
  }
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    if (bound[b] != 1) {
      throw InputError(where, "buffer '" + std::string(to_string(bufs[b])) + "' must be bound exactly once, is bound " +
                                  std::to_string(bound[b]) + " times");
    }
  }
}

namespace {
double shape_value(const OpShape& s, Source src, double constant) {
  switch (src) {
    case Source::m: return static_cast<double>(s.m);
    case Source::k_dim: return static_cast<double>(s.k);
    case Source::n: return static_cast<double>(s.n);
    case Source::nnz: return static_cast<double>(s.nnz);
    case Source::seq_len: return static_cast<double>(s.seq_len);
    case Source::heads: return static_cast<double>(s.heads);
    case Source::head_dim: return static_cast<double>(s.head_dim);
    case Source::window: return static_cast<double>(s.window);
    default: return constant;
  }
}
}  // namespace

std::vector<PackedArg> pack_args(const KernelSignature& sig, const OpShape& shape, const std::string& where) {
  validate_signature(sig, shape.kind, where);
  const auto bufs = buffers_of(shape.kind);
  std::vector<PackedArg> out;
  out.reserve(sig.args.size());
  for (std::size_t i = 0; i < sig.args.size(); ++i) {
    const auto& a = sig.args[i];
    PackedArg p;
    p.index = static_cast<int>(i);
    if (is_buffer(a.source)) {
      for (std::size_t b = 0; b < bufs.size(); ++b) {
        if (bufs[b] == a.source) p.buffer = static_cast<int>(b);
      }
      out.push_back(p);
      continue;
    }
    const double v = shape_value(shape, a.source, a.value);
    auto fits = [&](double lo, double hi) {
      if (!(v >= lo && v <= hi) || (a.type != ScalarType::f32 && v != std::floor(v))) {
        throw InputError(where + ".args[" + std::to_string(i) + "]",
                         "'" + a.name + "' = " + std::to_string(v) + " does not fit its declared type");
      }
    };
    switch (a.type) {
      case ScalarType::u32:
        fits(0, std::numeric_limits<std::uint32_t>::max());
        p.scalar = static_cast<std::uint32_t>(v);
        break;
      case ScalarType::i32:
        fits(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max());
        p.scalar = static_cast<std::int32_t>(v);
        break;
      case ScalarType::u64:
        fits(0, 1.8e19);
        p.scalar = static_cast<std::uint64_t>(v);
        break;
      case ScalarType::f32:
        fits(-std::numeric_limits<float>::max(), std::numeric_limits<float>::max());
        p.scalar = static_cast<float>(v);
        break;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace dype::kernels::xrt
