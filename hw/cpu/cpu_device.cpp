#include "hw/cpu/cpu_device.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include <tbb/task_arena.h>

#include "hw/cpu/cpu_buffer.h"
#include "hw/host_kernels.h"

namespace dype::hw {

struct CpuDevice::Arena {
  tbb::task_arena arena;
  explicit Arena(int threads) : arena(threads) {}
};

namespace {
int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

void wait_host(std::span<const Event>) {
  // cpu operations complete before their Event is returned, so there is nothing to wait for.
}
}  // namespace

CpuDevice::CpuDevice(DeviceInfo info, int threads)
    : Device(std::move(info)),
      threads_(threads > 0 ? threads : hardware_threads()),
      arena_(std::make_unique<Arena>(threads_)) {
  mutable_info().time_source = TimeSource::measured;
}

CpuDevice::~CpuDevice() = default;

BufferPtr CpuDevice::allocate(std::size_t bytes, AllocMode mode) {
  return std::make_unique<HostBuffer>(*this, bytes, mode);
}

BufferPtr CpuDevice::borrow_host(std::span<const std::byte> bytes,
                                 std::shared_ptr<const void> keep) {
  return std::make_unique<BorrowedHostBuffer>(*this, bytes, std::move(keep));
}

Event CpuDevice::do_launch(const KernelLaunch& l, std::span<const Event> after, int) {
  for (const Buffer* b : l.inputs) {
    if (!b->has_data()) throw InputError(name(), "input buffer holds no data (size-only)");
  }
  if (!l.output->has_data()) throw InputError(name(), "output buffer holds no data (size-only)");
  wait_host(after);
  Event e;
  e.source = TimeSource::measured;
  e.start_s = now_s();
  arena_->arena.execute([&] { run_on_host(l); });
  e.end_s = now_s();
  return e;
}

Event CpuDevice::do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                                   std::span<const Event> after) {
  wait_host(after);
  Event e;
  e.start_s = now_s();
  if (dst.has_data() && !src.empty()) std::memcpy(dst.host_span().data() + offset, src.data(), src.size());
  e.end_s = now_s();
  return e;
}

Event CpuDevice::do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                                 std::span<const Event> after) {
  wait_host(after);
  Event e;
  e.start_s = now_s();
  if (src.has_data() && !dst.empty()) std::memcpy(dst.data(), src.host_span().data() + offset, dst.size());
  e.end_s = now_s();
  return e;
}

DeviceInfo detect_cpu_info(const std::string& name) {
  DeviceInfo info;
  info.name = name;
  info.kind = DeviceKind::cpu;
  info.backend = "cpu";
  info.time_source = TimeSource::measured;
  info.product = "host CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) info.product = line.substr(colon + 2);
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::size_t kib = 0;
    std::string unit;
    meminfo >> kib >> unit;
    if (key == "MemTotal:") {
      info.memory_bytes = kib * 1024;
      break;
    }
  }
  return info;
}

}  // namespace dype::hw
