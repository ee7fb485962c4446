#include "hw/emu/emu_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "hw/cpu/cpu_buffer.h"
#include "hw/kernel_timing_model.h"
#include "hw/host_kernels.h"
#include "hw/topology.h"

namespace dype::hw {

namespace {

double latest(std::span<const Event> after, double t) {
  for (const Event& e : after) t = std::max(t, e.end_s);
  return t;
}

}  // namespace

EmuDevice::EmuDevice(DeviceInfo info, DeviceProfile model, EmuOptions options)
    : Device(std::move(info)), profile_(std::move(model)), options_(options), rng_(options.jitter_seed) {
  mutable_info().time_source = TimeSource::modelled;
  if (mutable_info().memory_bytes == 0) mutable_info().memory_bytes = profile_.memory_bytes;
}

bool EmuDevice::supports(kernels::OpKind op) const {
  std::lock_guard lock(mutex_);
  return timing::model_supports(profile_, bitstream_ ? &*bitstream_ : nullptr, op);
}

BufferPtr EmuDevice::allocate(std::size_t bytes, AllocMode mode) {
  // Timing-only devices never touch data: size-only buffers let paper-scale graphs "fit".
  if (timing_only()) mode = AllocMode::size_only;
  return std::make_unique<HostBuffer>(*this, bytes, mode);
}

void EmuDevice::check_fault_locked() {
  if (fault_skip_ < 0) return;
  if (fault_skip_ == 0) {
    fault_skip_ = -1;
    throw DeviceError(name(), fault_reason_);
  }
  --fault_skip_;
}

double EmuDevice::jittered_locked(double t) {
  if (options_.jitter_sigma <= 0.0) return t;
  std::normal_distribution<double> noise(0.0, options_.jitter_sigma);
  return t * std::max(0.5, 1.0 + noise(rng_));
}

double EmuDevice::modelled_time_s(const kernels::OpShape& shape) const {
  std::lock_guard lock(mutex_);
  return timing::modelled_time_s(profile_, bitstream_ ? &*bitstream_ : nullptr, shape, name());
}

Event EmuDevice::do_launch(const KernelLaunch& l, std::span<const Event> after, int) {
  std::lock_guard lock(mutex_);
  const double model_s =
      timing::modelled_time_s(profile_, bitstream_ ? &*bitstream_ : nullptr, l.shape, name());
  check_fault_locked();
  const double dur = jittered_locked(model_s);
  double start = latest(after, busy_until_s_);
  for (const Buffer* b : l.inputs) start = std::max(start, b->ready_at_s());
  start = std::max(start, l.output->ready_at_s());  // in-place ops (softmax) read it too
  if (!options_.timing_only) {
    for (const Buffer* b : l.inputs) {
      if (!b->has_data()) throw InputError(name(), "input buffer holds no data (size-only); enable timing_only");
    }
    if (!l.output->has_data()) throw InputError(name(), "output buffer holds no data (size-only)");
    run_on_host(l);
  }
  Event e;
  e.source = TimeSource::modelled;
  e.start_s = start;
  e.end_s = start + dur;
  e.energy_j = info().power.execute_w_for(l.shape.kind) * dur;
  l.output->set_ready_at_s(e.end_s);
  busy_until_s_ = e.end_s;
  busy_s_ += dur;
  execute_j_ += e.energy_j;
  return e;
}

double EmuDevice::transfer_time_to_host_s(std::size_t bytes) const {
  if (const Topology* t = topology()) {
    // Host memory is the coordinator's: a device on another machine crosses the NICs too.
    const int self = topology_index();
    return t->estimate_host_to(std::span<const int>(&self, 1), bytes).time_s +
           t->nic_leg_s(t->host_of(self), static_cast<double>(bytes));
  }
  return profile_.link.latency_s + static_cast<double>(bytes) / profile_.link.bandwidth_bytes_per_s();
}

Event EmuDevice::do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                                   std::span<const Event> after) {
  std::lock_guard lock(mutex_);
  check_fault_locked();
  const double dur = jittered_locked(transfer_time_to_host_s(src.size()));
  // The buffer's previous contents may still be read by earlier work: start after it is ready.
  // The buffer's previous contents may still be read by earlier work: start after it is ready.
  const double start = copy_start(Direction::inbound, std::max(latest(after, 0.0), dst.ready_at_s()), dur);
  if (!options_.timing_only && dst.has_data() && !src.empty()) {
    std::memcpy(dst.host_span().data() + offset, src.data(), src.size());
  }
  Event e{start, start + dur, TimeSource::modelled, copy_energy_w() * dur};
  dst.set_ready_at_s(e.end_s);
  copy_done(Direction::inbound, e.start_s, e.end_s);
  if (!options_.overlap_copies) busy_s_ += dur;
  transfer_j_ += e.energy_j;
  return e;
}

Event EmuDevice::do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                                 std::span<const Event> after) {
  std::lock_guard lock(mutex_);
  check_fault_locked();
  const double dur = jittered_locked(transfer_time_to_host_s(dst.size()));
  const double start = copy_start(Direction::outbound, std::max(latest(after, 0.0), src.ready_at_s()), dur);
  if (!options_.timing_only && src.has_data() && !dst.empty()) {
    std::memcpy(dst.data(), src.host_span().data() + offset, dst.size());
  }
  Event e{start, start + dur, TimeSource::modelled, copy_energy_w() * dur};
  copy_done(Direction::outbound, e.start_s, e.end_s);
  if (!options_.overlap_copies) busy_s_ += dur;
  transfer_j_ += e.energy_j;
  return e;
}

Event EmuDevice::do_copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region,
                                 std::span<const Event> after) {
  auto* peer = dynamic_cast<EmuDevice*>(&dst.device());
  if (peer == this) {
    // Within one device's memory: the topology's local path, no link involved (modelled as free).
    std::lock_guard lock(mutex_);
    check_fault_locked();
    const double start = std::max({latest(after, 0.0), src.ready_at_s(), dst.ready_at_s()});
    if (!options_.timing_only && src.has_data() && dst.has_data() && region.bytes > 0) {
      std::memmove(dst.host_span().data() + region.dst_offset, src.host_span().data() + region.src_offset,
                   region.bytes);
    }
    dst.set_ready_at_s(start);
    return Event{start, start, TimeSource::modelled, 0.0};
  }
  if (!peer || !topology() || peer->topology() != topology()) {
    return copy_to_peer_staged(src, dst, region, after);  // e.g. to the CPU: through host memory
  }
  if (topology()->host_of(topology_index()) != topology()->host_of(peer->topology_index())) {
    // Another machine: relayed through the coordinator's memory, each end busy only for its own
    // leg and its NIC (as a remote stage's link relays it).
    return copy_to_peer_staged(src, dst, region, after);
  }
  std::scoped_lock lock(mutex_, peer->mutex_);
  check_fault_locked();
  peer->check_fault_locked();
  const int a = topology_index(), b = peer->topology_index();
  const TransferEstimate x = topology()->estimate(std::span<const int>(&a, 1),
                                                  std::span<const int>(&b, 1), region.bytes);
  const double dur = jittered_locked(x.time_s);
  // Both ends' engines (this one's outbound, the peer's inbound) must be free at once: alternate
  // until they agree.
  double start = std::max({latest(after, 0.0), src.ready_at_s(), dst.ready_at_s()});
  for (int i = 0; i < 1000; ++i) {
    const double a = copy_start(Direction::outbound, start, dur), b = peer->copy_start(Direction::inbound, a, dur);
    start = b;
    if (b == a) break;
  }
  if (!options_.timing_only && !peer->options_.timing_only && src.has_data() && dst.has_data() &&
      region.bytes > 0) {
    std::memcpy(dst.host_span().data() + region.dst_offset, src.host_span().data() + region.src_offset,
                region.bytes);
  }
  // A transfer occupies both ends (paper Section III-B): their compute clocks, or with overlapping
  // copies their copy engines.
  const double mine = copy_energy_w() * dur, theirs = peer->copy_energy_w() * dur;
  Event e{start, start + dur, TimeSource::modelled, mine + theirs};
  dst.set_ready_at_s(e.end_s);
  copy_done(Direction::outbound, e.start_s, e.end_s);
  peer->copy_done(Direction::inbound, e.start_s, e.end_s);
  if (!options_.overlap_copies) busy_s_ += dur;
  if (!peer->options_.overlap_copies) peer->busy_s_ += dur;
  transfer_j_ += mine;
  peer->transfer_j_ += theirs;
  return e;
}

EnergyReport EmuDevice::energy_until(double t_s) const {
  std::lock_guard lock(mutex_);
  EnergyReport r;
  r.execute_j = execute_j_;
  r.transfer_j = transfer_j_;
  r.idle_j = info().power.idle_w * std::max(0.0, std::max({t_s, busy_until_s_, copies_in_.end(), copies_out_.end()}) - busy_s_);
  return r;
}

Event EmuDevice::load_bitstream(const Bitstream& bitstream) {
  std::lock_guard lock(mutex_);
  if (profile_.kind != DeviceKind::fpga) throw DeviceError(name(), "only FPGAs load bitstreams");
  if (bitstream.profile_id != profile_.id) {
    throw DeviceError(name(), "bitstream '" + bitstream.name + "' is built for '" +
                                  bitstream.profile_id + "', this device is '" + profile_.id + "'");
  }
  check_fault_locked();
  bitstream_ = bitstream;
  auto& power = mutable_info().power;
  power.execute_w_by_op.clear();
  for (const auto& k : bitstream.kernels) {
    if (k.dynamic_w > 0) power.execute_w_by_op[k.op] = power.idle_w + k.dynamic_w;
  }
  // Reconfiguration draws idle power and blocks the device.
  Event e{busy_until_s_, busy_until_s_ + bitstream.load_time_s, TimeSource::modelled,
          power.idle_w * bitstream.load_time_s};
  busy_until_s_ = e.end_s;
  return e;
}

void EmuDevice::unload_bitstream() {
  std::lock_guard lock(mutex_);
  if (profile_.kind != DeviceKind::fpga) throw DeviceError(name(), "only FPGAs load bitstreams");
  bitstream_.reset();
  mutable_info().power.execute_w_by_op.clear();
}

void EmuDevice::set_timing_only(bool on) {
  std::lock_guard lock(mutex_);
  options_.timing_only = on;
}

bool EmuDevice::timing_only() const {
  std::lock_guard lock(mutex_);
  return options_.timing_only;
}

void EmuDevice::set_jitter(double sigma, std::uint64_t seed) {
  std::lock_guard lock(mutex_);
  options_.jitter_sigma = sigma;
  options_.jitter_seed = seed;
  rng_.seed(seed);
}

void EmuDevice::inject_fault(int skip, std::string reason) {
  std::lock_guard lock(mutex_);
  fault_skip_ = std::max(0, skip);
  fault_reason_ = std::move(reason);
}

double EmuDevice::clock_s() const {
  std::lock_guard lock(mutex_);
  return std::max({busy_until_s_, copies_in_.end(), copies_out_.end()});
}

double EmuDevice::copy_start(Direction d, double ready, double dur) const {
  if (!options_.overlap_copies) return std::max(ready, busy_until_s_);
  return (d == Direction::inbound ? copies_in_ : copies_out_).earliest(ready, dur);
}

void EmuDevice::copy_done(Direction d, double start, double end) {
  if (options_.overlap_copies) (d == Direction::inbound ? copies_in_ : copies_out_).reserve(start, end);
  else busy_until_s_ = std::max(busy_until_s_, end);
}

double EmuDevice::CopyEngine::earliest(double ready, double dur) const {
  double t = std::max(ready, floor_);
  for (const auto& [s, e] : busy_) {
    if (e <= t) continue;
    if (s >= t + dur) break;  // fits in the gap before this interval
    t = e;
  }
  return t;
}

void EmuDevice::CopyEngine::reserve(double start, double end) {
  if (!(end > start)) return;
  const auto at = std::lower_bound(busy_.begin(), busy_.end(), std::pair{start, end});
  busy_.insert(at, {start, end});
  if (busy_.size() > kKept) {
    floor_ = std::max(floor_, busy_.front().second);
    busy_.erase(busy_.begin());
  }
}

double EmuDevice::copy_energy_w() const {
  const PowerStates& p = info().power;
  return options_.overlap_copies ? std::max(0.0, p.transfer_w - p.idle_w) : p.transfer_w;
}

void EmuDevice::reset_clock() {
  std::lock_guard lock(mutex_);
  busy_until_s_ = 0.0;
  copies_in_.reset();
  copies_out_.reset();
  busy_s_ = 0.0;
  execute_j_ = 0.0;
  transfer_j_ = 0.0;
}

}  // namespace dype::hw
