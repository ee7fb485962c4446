#pragma once
// The XRT part of a bitstream manifest (configs/bitstreams/*.yaml): which xclbin file to load and,
// per kernel, the compute unit's name and argument layout (kernels/xrt/xrt_args.h).
//
//   xclbin: u280-sextans-swat.xclbin        # relative to the manifest's folder
//   kernels:
//     - op: spmm
//       ...
//       xrt: {kernel: sextans, args: [{name: A_ptr, source: indptr}, ...,
//                                     {name: M, source: m, type: u32}]}
#include <map>
#include <string>

#include "common/op.h"
#include "kernels/xrt/xrt_args.h"

namespace dype::hw {

struct XrtManifest {
  std::string file;
  std::string xclbin;  // resolved path, "" when the manifest names none
  std::map<kernels::OpKind, kernels::xrt::KernelSignature> kernels;
};

// Throws InputError("<file>: <key path>", problem).
XrtManifest load_xrt_manifest(const std::string& bitstream_file);

}  // namespace dype::hw
