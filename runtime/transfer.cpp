#include "runtime/transfer.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "hw/device_ipc_memory.h"
#include "runtime/handoff_route.h"

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

// What an upload's copies into `device` wait for: the input's existence on a modelled clock.
std::vector<hw::Event> upload_after(const hw::Device& device, double not_before_s) {
  return device.info().time_source == hw::TimeSource::modelled ? modelled_after(not_before_s)
                                                               : std::vector<hw::Event>{};
}

// An uploaded shard: the rows the need holds, all of them valid; its tensors still to add.
Shard uploaded_shard(const Need& n) {
  Shard s;
  s.device = n.device;
  s.held_lo = s.valid_lo = n.lo;
  s.held_hi = s.valid_hi = n.hi;
  s.own_lo = n.own_lo;
  s.own_hi = n.own_hi;
  return s;
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
  return upload(std::span<const HostTensor>(&x, 1), needs, not_before_s, counters);
}

Activation TransferEngine::upload(std::span<const HostTensor> xs, const std::vector<Need>& needs,
                                  double not_before_s, TransferCounters& counters) const {
  if (xs.empty()) throw InputError("activation", "has no tensors to upload");
  Activation act;
  act.rows = xs[0].rows;
  act.size_only = xs[0].size_only;
  for (const HostTensor& x : xs) {
    if (x.rows != act.rows || x.size_only != act.size_only)
      throw InputError("activation", "tensors differ in rows (" + std::to_string(x.rows) + " vs " +
                                         std::to_string(act.rows) + ") or in being shape-only");
    act.cols.push_back(x.cols);
  }
  for (const Need& n : needs) {
    require_data_ok(*n.device, act.size_only);
    Shard s = uploaded_shard(n);
    const std::vector<hw::Event> after = upload_after(*n.device, not_before_s);
    for (const HostTensor& x : xs) {
      const std::size_t count = static_cast<std::size_t>((n.hi - n.lo) * x.cols);
      hw::BufferPtr b = n.device->allocate(count * sizeof(float));
      n.device->copy_from_host(*b, const_bytes(x.data, static_cast<std::size_t>(n.lo * x.cols), count, x.size_only), 0, after);
      counters.staged_copies++;
      counters.bytes += static_cast<double>(count * sizeof(float));
      s.tensors.push_back(std::move(b));
    }
    act.shards.push_back(std::move(s));
  }
  return act;
}

Activation TransferEngine::upload_input(const Request& request, const std::vector<Need>& needs,
                                        double not_before_s, TransferCounters& counters) const {
  const DeviceFeatures* on_gpu = request.device_input();
  const MappedFeatures* mapped = request.mapped_input();
  if (!on_gpu && !mapped) return upload(request.input(), needs, not_before_s, counters);
  Activation act;
  act.rows = request.rows();
  act.cols = {request.cols()};
  const auto cols = static_cast<std::size_t>(request.cols());
  for (const Need& n : needs) {
    const std::size_t count = static_cast<std::size_t>(n.hi - n.lo) * cols;
    const std::size_t first = static_cast<std::size_t>(n.lo) * cols;
    const std::span<const float> rows =
        mapped ? std::span<const float>(mapped->data + first, count) : std::span<const float>();
    // A device whose kernels read host memory reads mapped rows where they lie: no copy.
    hw::BufferPtr b = mapped ? n.device->borrow_host(std::as_bytes(rows), mapped->keep) : nullptr;
    if (b) {
      counters.moves++;
    } else {
      b = n.device->allocate(count * sizeof(float));
      if (on_gpu &&
          n.device->copy_from_ipc_memory(
              *b, *on_gpu->memory, on_gpu->offset + first * sizeof(float), count * sizeof(float))) {
        counters.p2p_copies++;
      } else {
        // Mapped rows copied from where they lie; device features held elsewhere, once, on the
        // host.
        const std::span<const float> x =
            mapped ? rows : std::span<const float>(request.input().data).subspan(first, count);
        n.device->copy_from_host(*b, std::as_bytes(x), 0, upload_after(*n.device, not_before_s));
        counters.staged_copies++;
      }
      counters.bytes += static_cast<double>(count * sizeof(float));
    }
    Shard s = uploaded_shard(n);
    s.tensors.push_back(std::move(b));
    act.shards.push_back(std::move(s));
  }
  return act;
}

namespace {

// Where a source shard's buffers are now: still in `from`, or handed over to a need of `out`.
struct SourceView {
  hw::Device* device = nullptr;
  const std::vector<hw::BufferPtr>* tensors = nullptr;
  std::int64_t held_lo = 0, own_lo = 0, own_hi = 0;
};

std::vector<SourceView> source_views(const Activation& from, const Activation& out, const std::vector<bool>& done) {
  std::vector<SourceView> v;
  for (const Shard& src : from.shards) {
    SourceView s{src.device, &src.tensors, src.held_lo, src.own_lo, src.own_hi};
    if (src.tensors.empty()) {
      s.tensors = nullptr;
      for (std::size_t j = 0; j < out.shards.size(); ++j) {
        const Shard& moved = out.shards[j];
        if (done[j] && moved.device == src.device && moved.held_lo == src.held_lo && moved.held_hi == src.held_hi) {
          s.tensors = &moved.tensors;
          break;
        }
      }
    }
    if (s.tensors) v.push_back(s);
  }
  return v;
}

// Whether some need reaches past the rows it will own (an SpMM's every row, a halo).
bool wide(const std::vector<Need>& needs) {
  return std::any_of(needs.begin(), needs.end(), [](const Need& n) { return n.lo < n.own_lo || n.hi > n.own_hi; });
}

// What a copy holds on these devices: their copy engines when every one overlaps copies.
CopyHolds holds(const std::vector<SourceView>& views, const std::vector<Need>& needs) {
  bool engines = true;
  for (const SourceView& v : views) engines = engines && v.device->copies_overlap();
  for (const Need& n : needs) engines = engines && n.device->copies_overlap();
  return engines ? CopyHolds::direction_engines : CopyHolds::devices;
}

// The route for the needs not yet done, planned once: the sources (their rows owned), the
// destinations (the rows needed) and which need each destination is. nullopt when the devices do
// not share one topology (the host relay, which needs none, then moves the data).
struct RoutedNeeds {
  std::vector<SourceView> views;
  std::vector<std::size_t> need_of;  // destination index -> need index
  RoutePlan plan;
};

std::optional<RoutedNeeds> plan_needs(const Activation& from, const Activation& out, const std::vector<Need>& needs,
                                      const std::vector<bool>& done) {
  RoutedNeeds r;
  r.views = source_views(from, out, done);
  const hw::Topology* topo = r.views.empty() ? nullptr : r.views.front().device->topology();
  if (!topo) return std::nullopt;
  std::vector<RouteEnd> src, dst;
  for (const SourceView& v : r.views) {
    if (v.device->topology() != topo) return std::nullopt;
    src.push_back({v.device->topology_index(), {v.own_lo, v.own_hi}});
  }
  for (std::size_t j = 0; j < needs.size(); ++j) {
    if (done[j]) continue;
    if (needs[j].device->topology() != topo) return std::nullopt;
    dst.push_back({needs[j].device->topology_index(), {needs[j].lo, needs[j].hi}});
    r.need_of.push_back(j);
  }
  double row_bytes = 0.0;
  for (std::int64_t c : from.cols) row_bytes += 4.0 * static_cast<double>(c);
  r.plan = plan_route(*topo, src, dst, row_bytes, static_cast<int>(from.cols.size()), holds(r.views, needs));
  return r;
}

// The direct route: each planned copy of a source's rows into a destination's buffer, in the
// plan's order, so the devices' timelines follow the costed schedule.
void send_direct(const RoutedNeeds& r, const std::vector<std::int64_t>& cols, Activation& out,
                 const std::vector<Need>& needs, std::vector<bool>& done, TransferCounters& counters) {
  const std::size_t nt = cols.size();
  for (std::size_t j : r.need_of) {
    const Need& n = needs[j];
    for (std::size_t t = 0; t < nt; ++t)
      out.shards[j].tensors.push_back(n.device->allocate(static_cast<std::size_t>((n.hi - n.lo) * cols[t]) * sizeof(float)));
  }
  for (const PeerCopy& c : r.plan.copies) {
    const SourceView& v = r.views[c.src];
    const std::size_t j = r.need_of[c.dst];
    const Need& n = needs[j];
    for (std::size_t t = 0; t < nt; ++t) {
      const auto row = static_cast<std::size_t>(cols[t]) * sizeof(float);
      const hw::CopyRegion region{static_cast<std::size_t>(c.rows.lo - v.held_lo) * row,
                                  static_cast<std::size_t>(c.rows.lo - n.lo) * row,
                                  static_cast<std::size_t>(c.rows.count()) * row};
      v.device->copy_to_peer(*(*v.tensors)[t], *out.shards[j].tensors[t], region);
      if (v.device == n.device) {
        counters.moves++;
      } else {
        counters.p2p_copies++;
        counters.bytes += static_cast<double>(region.bytes);
      }
    }
  }
  for (std::size_t j : r.need_of) done[j] = true;
}

}  // namespace

Activation TransferEngine::redistribute(Activation&& from, const std::vector<Need>& needs,
                                        TransferCounters& counters) const {
  Activation out;
  out.rows = from.rows;
  out.cols = from.cols;
  out.size_only = from.size_only;
  out.shards.resize(needs.size());
  std::vector<bool> done(needs.size(), false);

  // 1. Buffers that can move: same rows on the same device.
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
  if (wide(needs)) {
    // 2. Needs wider than the rows owned: the route handoff_route.h chooses from the topology.
    const auto routed = plan_needs(from, out, needs, done);
    if (routed && routed->plan.route == Route::direct) {
      send_direct(*routed, from.cols, out, needs, done, counters);
    } else {
      relay_through_host(from, out, needs, done, counters);
    }
    return out;
  }
  // 2. Row-local needs: a whole shard elsewhere is one peer copy.
  copy_whole_shards(from, out, needs, done, counters);
  relay_through_host(from, out, needs, done, counters);
  return out;
}

void TransferEngine::copy_whole_shards(const Activation& from, Activation& out, const std::vector<Need>& needs,
                                       std::vector<bool>& done, TransferCounters& counters) const {
  const std::size_t nt = from.cols.size();
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
}

void TransferEngine::relay_through_host(const Activation& from, Activation& out, const std::vector<Need>& needs,
                                        std::vector<bool>& done, TransferCounters& counters) const {
  if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return;
  const std::size_t nt = from.cols.size();
  // Every owned row once to the host, then out to each need.
  std::vector<std::vector<float>> host(nt);
  if (!from.size_only) {
    for (std::size_t t = 0; t < nt; ++t) host[t].resize(static_cast<std::size_t>(from.rows * from.cols[t]));
  }
  std::vector<hw::Event> gathered;
  for (const SourceView& src : source_views(from, out, done)) {
    for (std::size_t t = 0; t < nt; ++t) {
      const std::int64_t c = from.cols[t];
      const std::size_t count = static_cast<std::size_t>((src.own_hi - src.own_lo) * c);
      if (count == 0) continue;
      gathered.push_back(src.device->copy_to_host(
          *(*src.tensors)[t], mut_bytes(host[t], static_cast<std::size_t>(src.own_lo * c), count, from.size_only),
          static_cast<std::size_t>((src.own_lo - src.held_lo) * c) * sizeof(float)));
      counters.staged_copies++;
      counters.bytes += static_cast<double>(count * sizeof(float));
    }
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
    done[j] = true;
  }
}

namespace {

// The rows of tensor `t` into GPU memory a client registered for the answer: device to device
// from a shard on that very GPU, else through the host (the shard's rows, then one upload).
void download_into_device(const Activation& act, std::size_t t, TransferCounters& counters,
                          double& modelled_end_s, const AnswerMemory& into) {
  const std::int64_t c = act.cols.at(t);
  std::vector<float> staged;
  for (const Shard& s : act.shards) {
    const std::size_t count = static_cast<std::size_t>((s.own_hi - s.own_lo) * c);
    if (count == 0) continue;
    const std::size_t bytes = count * sizeof(float);
    const std::size_t src_offset =
        static_cast<std::size_t>((s.own_lo - s.held_lo) * c) * sizeof(float);
    const std::size_t dst_offset =
        into.device_offset + static_cast<std::size_t>(s.own_lo * c) * sizeof(float);
    std::optional<hw::Event> e =
        s.device->copy_to_ipc_memory(*s.tensors.at(t), src_offset, *into.device, dst_offset, bytes);
    if (e) {
      counters.p2p_copies++;
    } else {
      staged.resize(count);
      e = s.device->copy_to_host(*s.tensors.at(t), std::as_writable_bytes(std::span<float>(staged)),
                                 src_offset);
      into.device->write(dst_offset, staged.data(), bytes);
      counters.staged_copies += 2;
    }
    if (e->source == hw::TimeSource::modelled) modelled_end_s = std::max(modelled_end_s, e->end_s);
    counters.bytes += static_cast<double>(bytes);
  }
  into.written->store(true);
}

HostTensor download_tensor(const Activation& act, std::size_t t, TransferCounters& counters,
                           double& modelled_end_s, const AnswerMemory* into = nullptr) {
  const std::int64_t c = act.cols.at(t);
  const std::size_t total = static_cast<std::size_t>(act.rows * c);
  const bool room = into && !act.size_only && into->bytes >= total * sizeof(float);
  if (room && into->device) {
    download_into_device(act, t, counters, modelled_end_s, *into);
    return HostTensor::shape_only(act.rows, c);
  }
  // The client's memory takes the rows (no tensor of our own, no second copy) when it has room.
  const bool mapped = room && into->data;
  HostTensor y = act.size_only || mapped ? HostTensor::shape_only(act.rows, c)
                                         : HostTensor::zeros(act.rows, c);
  for (const Shard& s : act.shards) {
    const std::size_t count = static_cast<std::size_t>((s.own_hi - s.own_lo) * c);
    if (count == 0) continue;
    const std::size_t first = static_cast<std::size_t>(s.own_lo * c);
    const std::span<std::byte> to =
        mapped ? std::as_writable_bytes(std::span<float>(into->data + first, count))
               : mut_bytes(y.data, first, count, act.size_only);
    hw::Event e = s.device->copy_to_host(
        *s.tensors.at(t), to, static_cast<std::size_t>((s.own_lo - s.held_lo) * c) * sizeof(float));
    if (e.source == hw::TimeSource::modelled) modelled_end_s = std::max(modelled_end_s, e.end_s);
    counters.staged_copies++;
    counters.bytes += static_cast<double>(count * sizeof(float));
  }
  if (mapped) into->written->store(true);
  return y;
}

}  // namespace

HostTensor TransferEngine::download(const Activation& act, TransferCounters& counters,
                                    double& modelled_end_s, const AnswerMemory* into) const {
  return download_tensor(act, 0, counters, modelled_end_s, into);
}

std::vector<HostTensor> TransferEngine::download_all(const Activation& act, TransferCounters& counters,
                                                     double& modelled_end_s) const {
  std::vector<HostTensor> out;
  for (std::size_t t = 0; t < act.cols.size(); ++t) out.push_back(download_tensor(act, t, counters, modelled_end_s));
  return out;
}

}  // namespace dype::rt
