#include "hw/xrt/xrt_device.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hw/xrt/xrt_buffer.h"

namespace dype::hw {

namespace kx = kernels::xrt;
using kernels::OpKind;

std::optional<double> parse_board_power_w(const std::string& electrical_json) {
  const auto j = nlohmann::json::parse(electrical_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const auto it = j.find("power_consumption_watts");
  if (it == j.end()) return std::nullopt;
  // XRT reports numbers as strings ("23.456") and "N/A" when the sensor is absent.
  if (it->is_number()) return it->get<double>();
  if (!it->is_string()) return std::nullopt;
  try {
    std::size_t used = 0;
    const std::string s = it->get<std::string>();
    const double w = std::stod(s, &used);
    if (used != s.size() || w < 0) return std::nullopt;
    return w;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

XrtDevice::XrtDevice(DeviceInfo info, unsigned index, bool p2p_buffers)
    : Device(std::move(info)), index_(index), p2p_buffers_(p2p_buffers) {
  mutable_info().kind = DeviceKind::fpga;
  mutable_info().backend = "xrt";
  mutable_info().time_source = TimeSource::measured;
  try {
    device_ = ::xrt::device(index);
  } catch (const std::exception& e) {
    throw DeviceError(name(), "xrt::device(" + std::to_string(index) + ") failed: " + e.what());
  }
}

XrtDevice::~XrtDevice() {
  std::unique_lock lock(swap_mutex_);
  kernels_.clear();
}

bool XrtDevice::supports(OpKind op) const {
  std::shared_lock lock(swap_mutex_);
  return kernels_.count(op) > 0;
}

void XrtDevice::track(XrtBuffer* b) {
  std::lock_guard lock(buffers_mutex_);
  buffers_.push_back(b);
}

void XrtDevice::untrack(XrtBuffer* b) {
  std::lock_guard lock(buffers_mutex_);
  std::erase(buffers_, b);
}

::xrt::memory_group XrtDevice::default_group() const {
  // The memory bank of the first buffer argument of the first kernel: the banks a design's kernels
  // are connected to are in its xclbin, and one bank every kernel reaches is the safe default.
  for (const auto& [op, k] : kernels_) {
    const auto it = manifest_.kernels.find(op);
    if (it == manifest_.kernels.end()) continue;
    for (std::size_t i = 0; i < it->second.args.size(); ++i) {
      if (kx::is_buffer(it->second.args[i].source)) {
        return static_cast<::xrt::memory_group>(k.group_id(static_cast<int>(i)));
      }
    }
  }
  return 0;
}

BufferPtr XrtDevice::allocate(std::size_t bytes, AllocMode) {
  std::shared_lock lock(swap_mutex_);
  return std::make_unique<XrtBuffer>(*this, bytes, p2p_buffers_, default_group());
}

namespace {
XrtBuffer& on_device(const Buffer* b, const XrtDevice& dev, const char* arg) {
  auto* xb = dynamic_cast<XrtBuffer*>(const_cast<Buffer*>(b));
  if (!xb || &xb->device() != &dev) throw InputError(dev.name(), std::string(arg) + ": buffer is not on this device");
  return *xb;
}
}  // namespace

Event XrtDevice::do_launch(const KernelLaunch& l, std::span<const Event>, int) {
  std::shared_lock lock(swap_mutex_);
  const auto k = kernels_.find(l.shape.kind);
  if (k == kernels_.end()) {
    throw DeviceError(name(), std::string(kernels::to_string(l.shape.kind)) + " is not in the loaded bitstream" +
                                  (manifest_.file.empty() ? " (none loaded)" : " (" + manifest_.file + ")"));
  }
  const auto& sig = manifest_.kernels.at(l.shape.kind);
  const auto args = kx::pack_args(sig, l.shape, name() + ": " + sig.kernel);
  std::vector<const Buffer*> bufs(l.inputs.begin(), l.inputs.end());
  bufs.push_back(l.output);
  Event e;
  e.source = TimeSource::measured;
  try {
    ::xrt::run run(k->second);
    for (const auto& a : args) {
      if (a.buffer >= 0) {
        run.set_arg(a.index, on_device(bufs[static_cast<std::size_t>(a.buffer)], *this, sig.args[a.index].name.c_str()).bo());
      } else {
        std::visit([&](auto v) { run.set_arg(a.index, v); }, a.scalar);
      }
    }
    const auto power_before = board_power_w();
    e.start_s = now_s();
    run.start();
    run.wait();
    e.end_s = now_s();
    const auto power_after = board_power_w();
    if (power_before && power_after) {
      // Two board readings around the run: a measured (coarse) average power over its duration.
      e.energy_j = 0.5 * (*power_before + *power_after) * e.duration_s();
      std::lock_guard el(energy_mutex_);
      execute_j_ += e.energy_j;
      energy_known_ = true;
    }
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& ex) {
    throw DeviceError(name(), sig.kernel + " run failed: " + ex.what());
  }
  return e;
}

Event XrtDevice::do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                              std::span<const Event>) {
  auto& d = on_device(&dst, *this, "copy_from_host dst");
  std::shared_lock lock(swap_mutex_);
  Event e;
  e.start_s = now_s();
  if (!src.empty()) {
    try {
      d.bo().write(src.data(), src.size(), offset);
      d.bo().sync(XCL_BO_SYNC_BO_TO_DEVICE, src.size(), offset);
    } catch (const std::exception& ex) {
      throw DeviceError(name(), std::string("xrt::bo write/sync to device failed: ") + ex.what());
    }
  }
  e.end_s = now_s();
  return e;
}

Event XrtDevice::do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                            std::span<const Event>) {
  auto& s = on_device(&src, *this, "copy_to_host src");
  std::shared_lock lock(swap_mutex_);
  Event e;
  e.start_s = now_s();
  if (!dst.empty()) {
    try {
      s.bo().sync(XCL_BO_SYNC_BO_FROM_DEVICE, dst.size(), offset);
      s.bo().read(dst.data(), dst.size(), offset);
    } catch (const std::exception& ex) {
      throw DeviceError(name(), std::string("xrt::bo sync/read from device failed: ") + ex.what());
    }
  }
  e.end_s = now_s();
  return e;
}

std::optional<double> XrtDevice::board_power_w() const {
  try {
    return parse_board_power_w(device_.get_info<::xrt::info::device::electrical>());
  } catch (const std::exception&) {
    return std::nullopt;  // the shim has no electrical query
  }
}

std::optional<EnergyReport> XrtDevice::energy() const {
  std::lock_guard lock(energy_mutex_);
  if (!energy_known_) return std::nullopt;
  EnergyReport r;
  r.execute_j = execute_j_;
  return r;
}

XrtDevice::Image XrtDevice::open_image(const XrtManifest& m) {
  Image img;
  img.manifest = m;
  if (m.xclbin.empty()) throw InputError(m.file, "xclbin: the manifest names no xclbin file for the xrt backend");
  img.uuid = device_.load_xclbin(m.xclbin);
  for (const auto& [op, sig] : m.kernels) img.kernels.emplace(op, ::xrt::kernel(device_, img.uuid, sig.kernel));
  return img;
}

double XrtDevice::load_bitstream(const std::string& manifest_file) {
  const XrtManifest next = load_xrt_manifest(manifest_file);  // bad manifests fail before the drain
  const double t0 = now_s();
  std::unique_lock lock(swap_mutex_);  // drain: waits for every launch and copy in flight
  std::lock_guard block(buffers_mutex_);
  const XrtManifest previous = manifest_;
  // Release: kernels, then every bo (contents parked in host memory).
  kernels_.clear();
  for (auto* b : buffers_) b->park();
  auto restore = [&](const XrtManifest& m, std::map<OpKind, ::xrt::kernel> ks, ::xrt::uuid u) {
    manifest_ = m;
    kernels_ = std::move(ks);
    uuid_ = u;
    const auto group = default_group();
    for (auto* b : buffers_) b->restore(device_, group);
  };
  try {
    Image img = open_image(next);
    restore(img.manifest, std::move(img.kernels), img.uuid);
  } catch (const std::exception& e) {
    const std::string reason = e.what();
    try {
      if (!previous.xclbin.empty()) {
        Image old = open_image(previous);
        restore(old.manifest, std::move(old.kernels), old.uuid);
      } else {
        restore(previous, {}, {});
      }
    } catch (const std::exception& e2) {
      throw DeviceError(name(), "loading " + manifest_file + " failed (" + reason +
                                    ") and rolling back to the previous image failed too: " + e2.what());
    }
    throw DeviceError(name(), "loading " + manifest_file + " failed, previous image restored: " + reason);
  }
  image_.reset();  // loaded by file: no parsed Bitstream (load_bitstream(const Bitstream&) sets it)
  const double dt = now_s() - t0;
  spdlog::info("{}: loaded {} ({} kernels) in {:.3f} s (measured)", name(), manifest_file, kernels_.size(), dt);
  return dt;
}

Event XrtDevice::load_bitstream(const Bitstream& bitstream) {
  const double t0 = now_s();
  const double dt = load_bitstream(bitstream.file);
  std::unique_lock lock(swap_mutex_);
  image_ = bitstream;
  return Event{t0, t0 + dt, TimeSource::measured, -1.0};
}

const Bitstream* XrtDevice::bitstream() const {
  std::shared_lock lock(swap_mutex_);
  return image_ ? &*image_ : nullptr;
}

}  // namespace dype::hw
