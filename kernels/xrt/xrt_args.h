#pragma once
// Host-side launchers for FPGA kernels (Sextans-style SpMM, SWAT-style window attention): the
// argument layout of each kernel is declared in its bitstream manifest (configs/bitstreams/*.yaml,
// key kernels[i].xrt) rather than hard-coded, and packed here into an ordered list of buffer and
// scalar arguments for xrt::run::set_arg. Pure code, no XRT headers, testable anywhere.
//
//   xrt: {kernel: sextans, args: [{source: indptr}, {source: indices}, {source: values},
//         {source: x}, {source: y}, {source: m, type: u32}, {source: n, type: u32},
//         {source: nnz, type: u32}, {source: const, type: f32, value: 1.0}]}
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/op.h"

namespace dype::kernels::xrt {

// Where an argument's value comes from. Buffers are the KernelLaunch's buffers in hw's order
// (spmm: indptr, indices, values, x -> y; window_attention: q, k, v -> out); scalars come from the
// op shape; `constant` from the manifest.
enum class Source {
  indptr, indices, values, x, y,  // spmm buffers
  q, k, v, out,                   // window_attention buffers
  m, k_dim, n, nnz,               // spmm shape
  seq_len, heads, head_dim, window,  // attention shape
  constant,
};
enum class ScalarType { u32, i32, u64, f32 };

std::optional<Source> source_from_string(std::string_view s);  // "k" is k_dim for spmm
std::string_view to_string(Source s);
std::optional<ScalarType> scalar_type_from_string(std::string_view s);
bool is_buffer(Source s);

struct ArgSpec {
  std::string name;  // for messages; the kernel's argument name in the xclbin
  Source source = Source::constant;
  ScalarType type = ScalarType::u32;  // scalars only
  double value = 0.0;                 // constant only
};

struct KernelSignature {
  std::string kernel;  // compute unit name in the xclbin ("sextans", "swat")
  std::vector<ArgSpec> args;
};

// Checks that the signature can run `op`: each of the op's buffers bound exactly once, no buffer
// or shape field of another op, constants typed. Throws InputError(where, problem).
void validate_signature(const KernelSignature& sig, OpKind op, const std::string& where);

// One argument for xrt::run::set_arg(index, ...): a buffer (index into the launch's buffer list,
// inputs in order, then the output as the last) or a scalar of the declared width.
struct PackedArg {
  int index = 0;
  int buffer = -1;  // >= 0: the launch buffer to bind
  std::variant<std::uint32_t, std::int32_t, std::uint64_t, float> scalar{std::uint32_t{0}};
};

// Packs the arguments for one launch of `shape`. Throws InputError naming the argument when a
// value does not fit its declared type (e.g. nnz > 2^32 - 1 for a u32 argument).
std::vector<PackedArg> pack_args(const KernelSignature& sig, const OpShape& shape,
                                 const std::string& where);

}  // namespace dype::kernels::xrt
