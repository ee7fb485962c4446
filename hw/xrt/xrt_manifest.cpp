#include "hw/xrt/xrt_manifest.h"

#include <filesystem>

#include "hw/config_node.h"

namespace dype::hw {

namespace kx = kernels::xrt;

XrtManifest load_xrt_manifest(const std::string& file) {
  const ConfigNode root = ConfigNode::load_file(file);
  XrtManifest m;
  m.file = file;
  if (root.has("xclbin")) {
    const std::filesystem::path p(root.get_string("xclbin"));
    m.xclbin = p.is_absolute() ? p.string() : (std::filesystem::path(file).parent_path() / p).string();
  }
  const auto ks = root.child("kernels");
  ks.expect_sequence();
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const auto k = ks.at(i);
    const auto x = k.optional_child("xrt");
    if (!x) continue;  // modelled only (emu); the xrt backend cannot launch it
    x->expect_keys({"kernel", "args"});
    const auto op = kernels::op_kind_from_string(k.get_string("op"));
    if (!op) k.child("op").fail("unknown op");
    kx::KernelSignature sig;
    sig.kernel = x->get_string("kernel");
    const auto args = x->child("args");
    args.expect_sequence();
    for (std::size_t j = 0; j < args.size(); ++j) {
      const auto a = args.at(j);
      a.expect_keys({"name", "source", "type", "value"});
      kx::ArgSpec spec;
      const auto src = kx::source_from_string(a.get_string("source"));
      if (!src) a.child("source").fail("unknown source '" + a.get_string("source") + "'");
      spec.source = *src;
      spec.name = a.get_string("name", std::string(kx::to_string(*src)));
      if (!kx::is_buffer(spec.source)) {
        const auto t = kx::scalar_type_from_string(a.get_string("type", "u32"));
        if (!t) a.child("type").fail("must be one of u32, i32, u64, f32");
        spec.type = *t;
      } else if (a.has("type")) {
        a.child("type").fail("buffers take no type");
      }
      if (spec.source == kx::Source::constant) {
        spec.value = a.get_double("value");
      } else if (a.has("value")) {
        a.child("value").fail("only source const takes a value");
      }
      sig.args.push_back(spec);
    }
    kx::validate_signature(sig, *op, x->where());
    m.kernels[*op] = std::move(sig);
  }
  return m;
}

}  // namespace dype::hw
