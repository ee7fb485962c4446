#include "runtime/transfer.h"

#include <algorithm>
#include <cstring>

#include "kernels/error.h"

namespace dype::rt {

namespace {

// Stand-in storage for size-only copies: timing-only devices read only the span's size.
alignas(64) std::byte g_size_only_sink[64];

std::span<const std::byte> const_bytes(const std::vector<float>& v, std::size_t off, std::size_t n,
                                       bool size_only) {
  if (size_only) return {g_size_only_sink, n * sizeof(float)};
  return std::as_bytes(std::span<const float>(v).subspan(off, n));
}
std::span<std::byte> mut_bytes(std::vector<float>& v, std::size_t off, std::size_t n, bool size_only) {
  if (size_only) return {g_size_only_sink, n * sizeof(float)};
  return std::as_writable_bytes(std::span<float>(v).subspan(off, n));
}

void require_data_ok(const hw::Device& d, bool size_only) {
  if (size_only && !timing_only(d)) {
    throw InputError(d.name(), "size-only (timing-only) data can only run on timing-only emulated devices");
  }
}

std::vector<hw::Event> modelled_after(double not_before_s) {
  hw::Event e{not_before_s, not_before_s, hw::TimeSource::modelled, 0.0};
  return {e};
}

}  // namespace

bool timing_only(const hw::Device& device) {
  return device.timing_only();
}

bool TransferEngine::satisfied(const Activation& act, const std::vector<Need>& needs) {
  if (act.shards.size() != needs.size()) return false;
  for (std::size_t j = 0; j < needs.size(); ++j) {
    const Shard& s = act.shards[j];
    const Need& n = needs[j];
    if (s.device != n.device || s.valid_lo > n.lo || s.valid_hi < n.hi || s.own_lo != n.own_lo ||
        s.own_hi != n.own_hi) {
      return false;
    }
  }
  return true;
}

Activation TransferEngine::upload(const HostTensor& x, const std::vector<Need>& needs,
                                  double not_before_s, TransferCounters& counters) const {
  Activation act;
  act.rows = x.rows;
  act.cols = {x.cols};
  act.size_only = x.size_only;
  for (const Need& n : needs) {
    require_data_ok(*n.device, x.size_only);
    Shard s;
    s.device = n.device;
    s.held_lo = n.lo;
    s.held_hi = n.hi;
    s.own_lo = n.own_lo;
    s.own_hi = n.own_hi;
    s.valid_lo = n.lo;
    s.valid_hi = n.hi;
    const std::size_t count = static_cast<std::size_t>((n.hi - n.lo) * x.cols);
    hw::BufferPtr b = n.device->allocate(count * sizeof(float));
    const auto after = n.device->info().time_source == hw::TimeSource::modelled ? modelled_after(not_before_s)
                                                                                 : std::vector<hw::Event>{};
    n.device->copy_from_host(*b, const_bytes(x.data, static_cast<std::size_t>(n.lo * x.cols), count, x.size_only), 0, after);
    counters.staged_copies++;
    counters.bytes += static_cast<double>(count * sizeof(float));
    s.tensors.push_back(std::move(b));
    act.shards.push_back(std::move(s));
  }
  return act;
}

Activation TransferEngine::redistribute(Activation&& from, const std::vector<Need>& needs,
                                        TransferCounters& counters) const {
  Activation out;
  out.rows = from.rows;
  out.cols = from.cols;
  out.size_only = from.size_only;
  out.shards.resize(needs.size());
  const std::size_t nt = from.cols.size();
  std::vector<bool> done(needs.size(), false);

  // 1. Buffers that can move or be copied whole.
  for (std::size_t j = 0; j < needs.size(); ++j) {
    const Need& n = needs[j];
    require_data_ok(*n.device, from.size_only);
    Shard& dst = out.shards[j];
    dst.device = n.device;
    dst.held_lo = n.lo;
    dst.held_hi = n.hi;
    dst.own_lo = n.own_lo;
    dst.own_hi = n.own_hi;
    dst.valid_lo = n.lo;
    dst.valid_hi = n.hi;
    for (Shard& src : from.shards) {
      if (src.tensors.empty() || src.held_lo != n.lo || src.held_hi != n.hi || !src.fully_valid()) continue;
      if (src.device == n.device) {
        dst.tensors = std::move(src.tensors);  // same rows, same device: hand the buffers over
        counters.moves++;
        done[j] = true;
        break;
      }
    }
  }
  for (std::size_t j = 0; j < needs.size(); ++j) {
    if (done[j]) continue;
    const Need& n = needs[j];
    for (const Shard& src : from.shards) {
      if (src.tensors.empty() || src.held_lo != n.lo || src.held_hi != n.hi || !src.fully_valid()) continue;
      Shard& dst = out.shards[j];
      for (std::size_t t = 0; t < nt; ++t) {
        hw::BufferPtr b = n.device->allocate(src.tensors[t]->size_bytes());
        src.device->copy_to_peer(*src.tensors[t], *b);
        counters.p2p_copies++;
        counters.bytes += static_cast<double>(b->size_bytes());
        dst.tensors.push_back(std::move(b));
      }
      done[j] = true;
      break;
    }
  }
  if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return out;

  // 2. The rest through host memory: every owned row once to the host, then out to each need.
  std::vector<std::vector<float>> host(nt);
  if (!from.size_only) {
    for (std::size_t t = 0; t < nt; ++t) host[t].resize(static_cast<std::size_t>(from.rows * from.cols[t]));
  }
  std::vector<hw::Event> gathered;
  for (const Shard& src : from.shards) {
    if (src.tensors.empty()) {
      // Moved to a need above, but other needs may still want these rows: read them there.
      continue;
    }
    for (std::size_t t = 0; t < nt; ++t) {
      const std::int64_t c = from.cols[t];
      const std::size_t count = static_cast<std::size_t>((src.own_hi - src.own_lo) * c);
      if (count == 0) continue;
      gathered.push_back(src.device->copy_to_host(
          *src.tensors[t], mut_bytes(host[t], static_cast<std::size_t>(src.own_lo * c), count, from.size_only),
          static_cast<std::size_t>((src.own_lo - src.held_lo) * c) * sizeof(float)));
      counters.staged_copies++;
      counters.bytes += static_cast<double>(count * sizeof(float));
    }
  }
  // Shards whose buffers were handed over in step 1 now live in `out`: gather from there.
  for (std::size_t j = 0; j < needs.size(); ++j) {
    if (!done[j]) continue;
    const Shard& moved = out.shards[j];
    bool was_moved_source = false;
    for (const Shard& src : from.shards) {
      if (src.tensors.empty() && src.device == moved.device && src.held_lo == moved.held_lo &&
          src.held_hi == moved.held_hi) {
        was_moved_source = true;
        // Its owned rows are the source's owned rows.
        for (std::size_t t = 0; t < nt; ++t) {
          const std::int64_t c = from.cols[t];
          const std::size_t count = static_cast<std::size_t>((src.own_hi - src.own_lo) * c);
          if (count == 0) continue;
          gathered.push_back(moved.device->copy_to_host(
              *moved.tensors[t], mut_bytes(host[t], static_cast<std::size_t>(src.own_lo * c), count, from.size_only),
              static_cast<std::size_t>((src.own_lo - src.held_lo) * c) * sizeof(float)));
          counters.staged_copies++;
          counters.bytes += static_cast<double>(count * sizeof(float));
        }
        break;
      }
    }
    (void)was_moved_source;
  }
  for (std::size_t j = 0; j < needs.size(); ++j) {
    if (done[j]) continue;
    const Need& n = needs[j];
    Shard& dst = out.shards[j];
    std::vector<hw::Event> after;
    for (const hw::Event& e : gathered) {
      if (e.source == n.device->info().time_source) after.push_back(e);
    }
    for (std::size_t t = 0; t < nt; ++t) {
      const std::int64_t c = from.cols[t];
      const std::size_t count = static_cast<std::size_t>((n.hi - n.lo) * c);
      hw::BufferPtr b = n.device->allocate(count * sizeof(float));
      n.device->copy_from_host(*b, const_bytes(host[t], static_cast<std::size_t>(n.lo * c), count, from.size_only), 0, after);
      counters.staged_copies++;
      counters.bytes += static_cast<double>(count * sizeof(float));
      dst.tensors.push_back(std::move(b));
    }
  }
  return out;
}

HostTensor TransferEngine::download(const Activation& act, TransferCounters& counters,
                                    double& modelled_end_s) const {
  const std::int64_t c = act.cols.at(0);
  HostTensor y = act.size_only ? HostTensor::shape_only(act.rows, c) : HostTensor::zeros(act.rows, c);
  for (const Shard& s : act.shards) {
    const std::size_t count = static_cast<std::size_t>((s.own_hi - s.own_lo) * c);
    if (count == 0) continue;
    hw::Event e = s.device->copy_to_host(*s.tensors[0], mut_bytes(y.data, static_cast<std::size_t>(s.own_lo * c), count, act.size_only),
                                         static_cast<std::size_t>((s.own_lo - s.held_lo) * c) * sizeof(float));
    if (e.source == hw::TimeSource::modelled) modelled_end_s = std::max(modelled_end_s, e.end_s);
    counters.staged_copies++;
    counters.bytes += static_cast<double>(count * sizeof(float));
  }
  return y;
}

}  // namespace dype::rt
