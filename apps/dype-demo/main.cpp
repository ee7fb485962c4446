// dype-demo: loads a system config, runs a small GCN-like layer (SpMM then GEMM + bias + ReLU) on
// the CPU and on every emulated device, checks the emulated results equal the CPU's, and prints
// what it did; then evaluates the paper's S1..S4 shapes in timing-only mode per device kind.
// CPU times are measured; every emulated figure is modelled.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hw/emu/emu_device.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "common/csr.h"
#include "graph/generators.h"
#include "runtime/host_memory.h"

namespace {

using namespace dype;
using hw::Device;
using hw::Event;
using kernels::OpKind;

struct Graph {
  kernels::CsrI32 a;
  double degree_skew = 1.0;
};

// GCN propagation matrix: row-normalised adjacency with self loops (A + I, rows sum to 1).
Graph build_graph(std::int64_t nodes, std::int64_t edges, std::uint64_t seed) {
  const kernels::EdgeList el = kernels::generate_rmat(nodes, edges, seed);
  std::vector<std::int32_t> deg(nodes, 1);
  for (std::int64_t e = 0; e < el.num_edges(); ++e) ++deg[el.dst[e]];
  Graph g;
  g.a.rows = g.a.cols = nodes;
  g.a.indptr.assign(nodes + 1, 0);
  for (std::int64_t i = 0; i < nodes; ++i) g.a.indptr[i + 1] = g.a.indptr[i] + deg[i];
  g.a.indices.resize(g.a.indptr[nodes]);
  g.a.values.resize(g.a.indptr[nodes]);
  std::vector<std::int32_t> fill(g.a.indptr.begin(), g.a.indptr.end() - 1);
  auto put = [&](std::int64_t row, std::int64_t col) {
    g.a.indices[fill[row]] = static_cast<std::int32_t>(col);
    g.a.values[fill[row]++] = 1.0f / static_cast<float>(deg[row]);
  };
  for (std::int64_t i = 0; i < nodes; ++i) put(i, i);
  for (std::int64_t e = 0; e < el.num_edges(); ++e) put(el.dst[e], el.src[e]);
  const double mean = static_cast<double>(g.a.nnz()) / nodes;
  g.degree_skew = *std::max_element(deg.begin(), deg.end()) / mean;
  return g;
}

template <typename T>
hw::BufferPtr upload(Device& d, const std::vector<T>& v, double* xfer_s) {
  hw::BufferPtr b = d.allocate(v.size() * sizeof(T));
  const Event e = d.copy_from_host(*b, std::as_bytes(std::span<const T>(v)));
  *xfer_s += e.duration_s();
  return b;
}

std::string fmt_energy(const Event& e) {
  if (e.energy_j < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", e.energy_j);
  return buf;
}

void row(const std::string& dev, const std::string& kind, const std::string& op,
         const std::string& shape, double time_s, const char* source, const std::string& energy,
         const std::string& check) {
  std::printf("  %-7s %-5s %-18s %-38s %12.4f  %-9s %11s  %s\n", dev.c_str(), kind.c_str(), op.c_str(),
              shape.c_str(), time_s * 1e3, source, energy.c_str(), check.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  dype::rt::retain_freed_host_memory();  // activations reuse heap pages (runtime/host_memory.h)
  CLI::App app{"dype-demo: run a GCN-like layer on the CPU and on emulated GPUs/FPGAs of a system\n"
               "config, check the results agree, and model the paper's S1..S4 shapes.\n"
               "CPU times are measured; emulated-device times and all energies are modelled."};
  std::string system_path = hw::default_config_dir() + "/systems/paper-testbed-pcie4.yaml";
  std::int64_t nodes = 4096, edges = 40000, features = 64, hidden = 32;
  std::uint64_t seed = 42;
  bool skip_paper = false;
  app.add_option("-s,--system", system_path, "system config (YAML)")->capture_default_str();
  app.add_option("--nodes", nodes, "graph nodes")->capture_default_str()->check(CLI::Range(2, 10000000));
  app.add_option("--edges", edges, "graph edges (R-MAT)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--features", features, "input feature length")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--hidden", hidden, "GEMM output width")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "graph and feature seed")->capture_default_str();
  app.add_flag("--no-paper-scale", skip_paper, "skip the timing-only S1..S4 pass");
  CLI11_PARSE(app, argc, argv);

  try {
    hw::System sys = hw::System::from_config(hw::load_system_config(system_path));
    std::printf("system %s: %s\n", sys.config().name.c_str(), sys.config().description.c_str());
    std::printf("  %-7s %-5s %-8s %-34s %10s  %-22s %s\n", "device", "kind", "backend", "model",
                "memory", "link", "socket");
    for (Device* d : sys.devices()) {
      const auto& td = sys.topology().device(d->topology_index());
      char link[64];
      if (td.link.type == hw::LinkType::host) std::snprintf(link, sizeof link, "host memory");
      else std::snprintf(link, sizeof link, "%s%d x%d %.1f GB/s%s", td.link.type == hw::LinkType::cxl ? "CXL " : "PCIe ",
                         td.link.generation, td.link.lanes, td.link.bandwidth_bytes_per_s() / 1e9,
                         td.p2p ? " p2p" : "");
      std::printf("  %-7s %-5s %-8s %-34.34s %7.1f GiB  %-22s %d\n", d->name().c_str(),
                  std::string(to_string(d->kind())).c_str(), d->info().backend.c_str(),
                  d->info().product.c_str(), d->info().memory_bytes / 1073741824.0, link, td.socket);
    }

    // ---- 1. A GCN-like layer everywhere it can run --------------------------------------------
    const Graph g = build_graph(nodes, edges, seed);
    const std::vector<float> x = kernels::generate_features(nodes, features, seed + 1);
    const std::vector<float> w = kernels::generate_features(features, hidden, seed + 2);
    const std::vector<float> bias = kernels::generate_features(1, hidden, seed + 3);
    const std::int64_t nnz = g.a.nnz();
    std::printf("\nGCN layer: Y = ReLU((A X) W + b), A %lldx%lld nnz=%lld (skew %.1f), X %lldx%lld, W %lldx%lld\n",
                (long long)nodes, (long long)nodes, (long long)nnz, g.degree_skew, (long long)nodes,
                (long long)features, (long long)features, (long long)hidden);
    std::printf("  %-7s %-5s %-18s %-38s %12s  %-9s %11s  %s\n", "device", "kind", "op", "shape",
                "time [ms]", "time is", "energy [J]", "check vs cpu");

    std::vector<float> ref_ax, ref_y;
    bool all_ok = true;
    std::vector<Device*> order;  // CPU first: it is the reference
    for (Device* d : sys.devices()) if (d->kind() == hw::DeviceKind::cpu) order.push_back(d);
    for (Device* d : sys.devices()) if (d->kind() != hw::DeviceKind::cpu) order.push_back(d);
    for (Device* d : order) {
      const bool is_ref = ref_ax.empty();
      const std::string kind(to_string(d->kind()));
      const char* src = std::string(to_string(d->info().time_source)) == "measured" ? "measured" : "modelled";
      double xfer_s = 0.0;
      hw::BufferPtr ip = upload(*d, g.a.indptr, &xfer_s), ix = upload(*d, g.a.indices, &xfer_s),
                    iv = upload(*d, g.a.values, &xfer_s), bx = upload(*d, x, &xfer_s);
      row(d->name(), kind, "copy host->dev", std::to_string((ip->size_bytes() + ix->size_bytes() + iv->size_bytes() + bx->size_bytes()) >> 10) + " KiB (graph + X)",
          xfer_s, src, "-", "");
      hw::BufferPtr bax = d->allocate(nodes * features * 4);
      std::vector<float> ax(nodes * features);
      if (d->supports(OpKind::spmm)) {
        const auto l = hw::KernelLaunch::spmm(*ip, *ix, *iv, *bx, *bax, nodes, nodes, features, nnz, 4, g.degree_skew);
        const Event e = d->launch(l);
        d->copy_to_host(*bax, std::as_writable_bytes(std::span<float>(ax)));
        std::string check = "reference";
        if (is_ref) ref_ax = ax;
        else {
          const bool ok = ax == ref_ax;
          all_ok = all_ok && ok;
          check = ok ? "equal" : "MISMATCH";
        }
        row(d->name(), kind, "spmm", hw::describe(l.shape), e.duration_s(), src, fmt_energy(e), check);
      } else {
        row(d->name(), kind, "spmm", "unsupported on this device", 0, "-", "-", "");
        ax = ref_ax;  // continue from the reference so the GEMM still runs
        d->copy_from_host(*bax, std::as_bytes(std::span<const float>(ax)));
      }
      if (d->supports(OpKind::gemm)) {
        hw::BufferPtr bw = upload(*d, w, &xfer_s), bb = upload(*d, bias, &xfer_s);
        hw::BufferPtr by = d->allocate(nodes * hidden * 4);
        const auto l = hw::KernelLaunch::gemm(*bax, *bw, bb.get(), *by, nodes, features, hidden,
                                              kernels::Epilogue::bias_relu);
        const Event e = d->launch(l);
        std::vector<float> y(nodes * hidden);
        d->copy_to_host(*by, std::as_writable_bytes(std::span<float>(y)));
        std::string check = "reference";
        if (is_ref) ref_y = y;
        else {
          const bool ok = y == ref_y;
          all_ok = all_ok && ok;
          check = ok ? "equal" : "MISMATCH";
        }
        row(d->name(), kind, "gemm+bias+relu", hw::describe(l.shape), e.duration_s(), src, fmt_energy(e), check);
      } else {
        row(d->name(), kind, "gemm+bias+relu", "unsupported (bitstream has no gemm)", 0, "-", "-", "");
      }
      if (auto* emu = dynamic_cast<hw::EmuDevice*>(d)) {
        const auto en = emu->energy();
        std::printf("  %-7s %-5s %-18s virtual clock %.4f ms; energy idle %.4g J, execute %.4g J, transfer %.4g J (modelled)\n",
                    d->name().c_str(), kind.c_str(), "device total", emu->clock_s() * 1e3, en->idle_j,
                    en->execute_j, en->transfer_j);
      }
    }

    // ---- 2. Transfers the scheduler would cost: SpMM output from the FPGAs to the GPUs --------
    const auto fpgas = sys.devices_of(hw::DeviceKind::fpga);
    const auto gpus = sys.devices_of(hw::DeviceKind::gpu);
    if (!fpgas.empty() && !gpus.empty()) {
      const std::size_t bytes = static_cast<std::size_t>(nodes) * features * 4;
      const auto src = sys.indices(fpgas), dst = sys.indices(gpus);
      std::printf("\ntransfer of A X (%zu KiB) from %zu FPGA(s) to %zu GPU(s) (modelled):\n", bytes >> 10,
                  fpgas.size(), gpus.size());
      for (auto path : {hw::TransferPath::host_staged, hw::TransferPath::p2p}) {
        if (path == hw::TransferPath::p2p && !sys.topology().p2p_possible(src, dst)) continue;
        const auto e = sys.topology().estimate(src, dst, bytes, path);
        std::printf("  %-12s %10.4f ms  %7.2f GB/s%s\n", std::string(to_string(path)).c_str(), e.time_s * 1e3,
                    e.bandwidth_bytes_per_s / 1e9, e.crosses_socket ? "  (crosses sockets)" : "");
      }
    }

    // ---- 3. Paper-scale shapes, timing only ----------------------------------------------------
    if (!skip_paper) {
      std::printf("\npaper-scale GCN layer shapes (Table I), timing-only on one device of each kind (modelled):\n");
      std::printf("  %-5s %-5s %-7s %-40s %12s %11s\n", "shape", "kind", "device", "op", "time [ms]", "energy [J]");
      std::map<hw::DeviceKind, hw::EmuDevice*> one;
      for (Device* d : sys.devices()) {
        if (auto* e = dynamic_cast<hw::EmuDevice*>(d); e && !one.count(d->kind())) one[d->kind()] = e;
      }
      for (auto ds : {kernels::PaperDataset::s1, kernels::PaperDataset::s2, kernels::PaperDataset::s3,
                      kernels::PaperDataset::s4}) {
        const kernels::GraphShape s = kernels::paper_shape(ds);
        for (auto& [kind, dev] : one) {
          dev->set_timing_only(true);
          dev->reset_clock();
          const std::int64_t n = s.nodes, f = s.feature_len, h = 128;
          auto ip = dev->allocate(4 * (n + 1)), ix = dev->allocate(4 * s.edges), iv = dev->allocate(4 * s.edges);
          auto bx = dev->allocate(4 * n * f), by = dev->allocate(4 * n * f);
          auto report = [&](const hw::KernelLaunch& l, const char* label) {
            if (!dev->supports(l.shape.kind)) {
              std::printf("  %-5s %-5s %-7s %-40s %12s %11s\n", std::string(to_string(ds)).c_str(),
                          std::string(to_string(kind)).c_str(), dev->name().c_str(), label, "unsupported", "-");
              return;
            }
            const Event e = dev->launch(l);
            std::printf("  %-5s %-5s %-7s %-40s %12.3f %11.4g\n", std::string(to_string(ds)).c_str(),
                        std::string(to_string(kind)).c_str(), dev->name().c_str(), hw::describe(l.shape).c_str(),
                        e.duration_s() * 1e3, e.energy_j);
            (void)label;
          };
          report(hw::KernelLaunch::spmm(*ip, *ix, *iv, *bx, *by, n, n, f, s.edges), "spmm");
          auto bw = dev->allocate(4 * f * h), bh = dev->allocate(4 * n * h);
          report(hw::KernelLaunch::gemm(*by, *bw, nullptr, *bh, n, f, h), "gemm");
        }
      }
      std::printf("  (the CPU is not in this pass: it would run the real arithmetic)\n");
    }
    std::printf("\nresult: emulated results %s the CPU's\n", all_ok ? "equal" : "DIFFER FROM");
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dype-demo: %s\n", e.what());
    return 2;
  }
}
