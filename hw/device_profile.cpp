#include "hw/device_profile.h"

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "hw/config_parse.h"
#include "common/error.h"

namespace dype::hw {

using kernels::OpKind;

std::string_view to_string(ProfileSource source) {
  switch (source) {
    case ProfileSource::file: return "file";
    case ProfileSource::known_product: return "known product";
    case ProfileSource::detected: return "detected attributes";
  }
  return "unknown";
}

Link parse_link(const ConfigNode& node, const Link& defaults) {
  node.expect_keys({"type", "generation", "lanes", "latency_us", "measured_gbps"});
  Link l = defaults;
  if (node.has("type")) {
    const auto t = node.child("type");
    const std::string s = t.as_string();
    if (s == "pcie") l.type = LinkType::pcie;
    else if (s == "cxl") l.type = LinkType::cxl;
    else t.fail("must be one of pcie, cxl, got '" + s + "'");
  }
  if (node.has("generation")) {
    const auto g = node.child("generation");
    const auto v = g.as_int();
    if (l.type == LinkType::pcie && (v < 1 || v > 6)) g.fail("PCIe generation must be 1-6, got " + std::to_string(v));
    if (l.type == LinkType::cxl && (v < 1 || v > 3)) g.fail("CXL version must be 1-3, got " + std::to_string(v));
    l.generation = static_cast<int>(v);
  }
  if (node.has("lanes")) {
    const auto n = node.child("lanes");
    const auto v = n.as_int();
    if (v != 1 && v != 2 && v != 4 && v != 8 && v != 16) {
      n.fail("must be one of 1,2,4,8,16, got " + std::to_string(v));
    }
    l.lanes = static_cast<int>(v);
  }
  l.latency_s = node.get_positive("latency_us", l.latency_s * 1e6, true) * 1e-6;
  l.measured_bytes_per_s = node.get_positive("measured_gbps", l.measured_bytes_per_s / 1e9, true) * 1e9;
  return l;
}

PowerStates parse_power(const ConfigNode& node, const PowerStates& defaults) {
  node.expect_keys({"idle_w", "execute_w", "transfer_w", "execute_w_by_op"});
  PowerStates p = defaults;
  p.idle_w = node.get_positive("idle_w", p.idle_w, true);
  p.execute_w = node.get_positive("execute_w", p.execute_w, true);
  p.transfer_w = node.get_positive("transfer_w", p.transfer_w, true);
  if (auto by_op = node.optional_child("execute_w_by_op")) {
    by_op->expect_map();
    for (const auto& kv : by_op->yaml()) {
      const std::string key = kv.first.as<std::string>();
      const auto op = kernels::op_kind_from_string(key);
      if (!op) ConfigNode(kv.first, node.file(), by_op->path() + "." + key).fail("unknown op");
      p.execute_w_by_op[*op] = by_op->get_positive(key, true);
    }
  }
  if (p.execute_w < p.idle_w) node.fail("execute_w must be >= idle_w (it includes static power)");
  if (p.transfer_w < p.idle_w) node.fail("transfer_w must be >= idle_w (it includes static power)");
  return p;
}

std::string resolve_config_path(const std::string& referring_file, const std::string& ref) {
  namespace fs = std::filesystem;
  const fs::path r(ref);
  if (r.is_absolute()) return ref;
  const fs::path dir = fs::path(referring_file).parent_path();
  for (const fs::path& base : {dir, dir.parent_path()}) {
    if (fs::exists(base / r)) return (base / r).lexically_normal().string();
  }
  return (dir / r).lexically_normal().string();
}

namespace {

OpModelParams parse_op(const ConfigNode& n) {
  n.expect_keys({"compute_efficiency", "memory_efficiency", "launch_overhead_us", "skew_penalty", "wavefront",
                 "row_latency_us", "concurrent_rows", "gather_bytes"});
  OpModelParams p;
  p.compute_efficiency = n.get_positive("compute_efficiency", p.compute_efficiency);
  p.memory_efficiency = n.get_positive("memory_efficiency", p.memory_efficiency);
  if (p.compute_efficiency > 1.0) n.child("compute_efficiency").fail("must be <= 1");
  if (p.memory_efficiency > 1.0) n.child("memory_efficiency").fail("must be <= 1");
  p.launch_overhead_s = n.get_positive("launch_overhead_us", p.launch_overhead_s * 1e6, true) * 1e-6;
  p.skew_penalty = n.get_positive("skew_penalty", p.skew_penalty, true);
  p.wavefront = n.get_positive("wavefront", p.wavefront, true);
  p.row_latency_s = n.get_positive("row_latency_us", p.row_latency_s * 1e6, true) * 1e-6;
  p.concurrent_rows = n.get_positive("concurrent_rows", p.concurrent_rows, true);
  p.gather_bytes = n.get_positive("gather_bytes", p.gather_bytes, true);
  if ((p.row_latency_s > 0) != (p.concurrent_rows > 0)) {
    n.fail("row_latency_us and concurrent_rows go together (row passes per second = their ratio)");
  }
  return p;
}

}  // namespace

DeviceProfile load_device_profile(const std::string& path) {
  const ConfigNode root = ConfigNode::load_file(path);
  root.expect_keys({"id", "model", "kind", "memory", "compute", "link", "power", "ops"});
  DeviceProfile d;
  d.file = path;
  d.id = root.get_string("id");
  d.product = root.get_string("model");
  const auto kind_node = root.child("kind");
  const auto kind = device_kind_from_string(kind_node.as_string());
  if (!kind) kind_node.fail("must be one of cpu, gpu, fpga, got '" + kind_node.as_string() + "'");
  d.kind = *kind;

  const auto mem = root.child("memory");
  mem.expect_keys({"type", "capacity_gib", "bandwidth_gbps"});
  d.memory_type = mem.get_string("type", "");
  d.memory_bytes = static_cast<std::size_t>(mem.get_positive("capacity_gib") * 1073741824.0);
  d.memory_bandwidth_bytes_per_s = mem.get_positive("bandwidth_gbps") * 1e9;

  if (auto c = root.optional_child("compute")) {
    c->expect_keys({"peak_fp32_tflops", "cache_mib", "saturation_outputs"});
    d.peak_fp32_flops = c->get_positive("peak_fp32_tflops", 0.0, true) * 1e12;
    d.cache_bytes = c->get_positive("cache_mib", 0.0, true) * 1048576.0;
    d.saturation_outputs = c->get_positive("saturation_outputs", 0.0, true);
  }
  if (auto l = root.optional_child("link")) d.link = parse_link(*l, d.link);
  d.power = parse_power(root.child("power"), d.power);

  if (auto ops = root.optional_child("ops")) {
    ops->expect_map();
    if (d.kind == DeviceKind::fpga) ops->fail("an FPGA's kernels come from its bitstream, not the device model");
    if (d.peak_fp32_flops <= 0) root.child("compute").fail("peak_fp32_tflops is required when ops are listed");
    for (const auto& kv : ops->yaml()) {
      const std::string key = kv.first.as<std::string>();
      const auto op = kernels::op_kind_from_string(key);
      if (!op) ConfigNode(kv.first, root.file(), ops->path() + "." + key).fail("unknown op");
      d.ops[*op] = parse_op(ops->child(key));
    }
  }
  return d;
}

const BitstreamKernel* Bitstream::find(OpKind op) const {
  for (const auto& k : kernels) {
    if (k.op == op) return &k;
  }
  return nullptr;
}

Bitstream load_bitstream(const std::string& path) {
  const ConfigNode root = ConfigNode::load_file(path);
  // xclbin and kernels[i].xrt are read by the xrt backend (hw/xrt/xrt_manifest.h).
  root.expect_keys({"name", "device_model", "load_time_ms", "kernels", "xclbin"});
  Bitstream b;
  b.file = path;
  b.name = root.get_string("name");
  b.profile_id = root.get_string("device_model");
  b.load_time_s = root.get_positive("load_time_ms", 0.0, true) * 1e-3;
  const auto ks = root.child("kernels");
  ks.expect_sequence();
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const auto n = ks.at(i);
    n.expect_keys({"op", "design", "scale_c", "frequency_mhz", "mac_units", "pipeline_cycles",
                   "init_cycles", "peak_gflops", "efficiency", "launch_overhead_us", "dynamic_w",
                   "xrt"});
    BitstreamKernel k;
    const auto opn = n.child("op");
    const auto op = kernels::op_kind_from_string(opn.as_string());
    if (!op) opn.fail("unknown op '" + opn.as_string() + "'");
    if (b.find(*op)) opn.fail("op listed twice");
    k.op = *op;
    k.design = n.get_string("design");
    k.scale_c = n.get_positive("scale_c", 1.0);
    k.launch_overhead_s = n.get_positive("launch_overhead_us", 0.0, true) * 1e-6;
    k.dynamic_w = n.get_positive("dynamic_w", 0.0, true);
    if (k.design == "sextans") {
      if (k.op != OpKind::spmm) opn.fail("design sextans implements spmm");
      k.frequency_mhz = n.get_positive("frequency_mhz");
      k.mac_units = static_cast<int>(n.get_positive("mac_units"));
    } else if (k.design == "swat") {
      if (k.op != OpKind::window_attention) opn.fail("design swat implements window_attention");
      k.frequency_mhz = n.get_positive("frequency_mhz");
      k.pipeline_cycles = n.get_positive("pipeline_cycles");
      k.init_cycles = n.get_positive("init_cycles", true);
    } else if (k.design == "systolic_gemm") {
      if (k.op != OpKind::gemm) opn.fail("design systolic_gemm implements gemm");
      k.peak_flops = n.get_positive("peak_gflops") * 1e9;
      k.efficiency = n.get_positive("efficiency", 1.0);
      if (k.efficiency > 1.0) n.child("efficiency").fail("must be <= 1");
    } else {
      n.child("design").fail("must be one of sextans, swat, systolic_gemm, got '" + k.design + "'");
    }
    b.kernels.push_back(k);
  }
  return b;
}

std::string device_profile_yaml(const DeviceProfile& d) {
  YAML::Node n;
  n["id"] = d.id;
  n["model"] = d.product;
  n["kind"] = std::string(to_string(d.kind));
  if (!d.memory_type.empty()) n["memory"]["type"] = d.memory_type;
  n["memory"]["capacity_gib"] = static_cast<double>(d.memory_bytes) / 1073741824.0;
  n["memory"]["bandwidth_gbps"] = d.memory_bandwidth_bytes_per_s / 1e9;
  if (d.peak_fp32_flops > 0) n["compute"]["peak_fp32_tflops"] = d.peak_fp32_flops / 1e12;
  if (d.cache_bytes > 0) n["compute"]["cache_mib"] = d.cache_bytes / 1048576.0;
  if (d.saturation_outputs > 0) n["compute"]["saturation_outputs"] = d.saturation_outputs;
  if (d.kind != DeviceKind::cpu) {
    n["link"]["type"] = std::string(to_string(d.link.type));
    n["link"]["generation"] = d.link.generation;
    n["link"]["lanes"] = d.link.lanes;
    n["link"]["latency_us"] = d.link.latency_s * 1e6;
    if (d.link.measured_bytes_per_s > 0) n["link"]["measured_gbps"] = d.link.measured_bytes_per_s / 1e9;
  }
  n["power"]["idle_w"] = d.power.idle_w;
  n["power"]["execute_w"] = d.power.execute_w;
  n["power"]["transfer_w"] = d.power.transfer_w;
  for (const auto& [op, p] : d.ops) {
    YAML::Node o;
    o["compute_efficiency"] = p.compute_efficiency;
    o["memory_efficiency"] = p.memory_efficiency;
    o["launch_overhead_us"] = p.launch_overhead_s * 1e6;
    if (p.skew_penalty > 0) o["skew_penalty"] = p.skew_penalty;
    if (p.wavefront > 0) o["wavefront"] = p.wavefront;
    if (p.row_latency_s > 0) o["row_latency_us"] = p.row_latency_s * 1e6;
    if (p.concurrent_rows > 0) o["concurrent_rows"] = p.concurrent_rows;
    if (p.gather_bytes > 0) o["gather_bytes"] = p.gather_bytes;
    n["ops"][std::string(kernels::to_string(op))] = o;
  }
  YAML::Emitter out;
  out.SetDoublePrecision(10);
  out << n;
  return std::string(out.c_str()) + "\n";
}

}  // namespace dype::hw
