#pragma once
// GpuDevice<Api>'s member definitions, included once per vendor by the file that instantiates it
// (hw/cuda/cuda_device.cpp: template class GpuDevice<CudaRuntime>; hw/hip/hip_device.cpp likewise).
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "hw/device_ipc_memory.h"
#include "hw/gpu/gpu_device.h"
#include "hw/pinned_host_memory.h"

namespace dype::hw {

template <class Api>
struct GpuDevice<Api>::Queue {
  typename Api::Stream stream{};
  typename Api::Event start{}, stop{};
  std::mutex mutex;  // one launch at a time per stream: handles and events are per queue

  explicit Queue(const std::string& dev) {
    // A throwing constructor runs no destructor: release what was made so far.
    try {
      Api::check(dev, Api::kStreamCreate, Api::stream_create(&stream));
      Api::check(dev, Api::kEventCreate, Api::event_create(&start));
      Api::check(dev, Api::kEventCreate, Api::event_create(&stop));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Queue() { release(); }
  void release() {
    if (start) (void)Api::event_destroy(start);
    if (stop) (void)Api::event_destroy(stop);
    if (stream) (void)Api::stream_destroy(stream);
    start = stop = {};
    stream = {};
  }
};

// Two pinned slots and a copy stream, one set per direction: the host memcpy of one chunk overlaps
// the DMA of the other. The lock keeps one copy at a time in each direction.
template <class Api>
struct GpuDevice<Api>::Staging {
  std::mutex mutex;
  PinnedHostBuffer<Api> slot[2];
  typename Api::Event done[2] = {};
  typename Api::Stream stream{};
  Staging(const std::string& dev, std::size_t chunk) : slot{PinnedHostBuffer<Api>(chunk), PinnedHostBuffer<Api>(chunk)} {
    try {
      Api::check(dev, Api::kStreamCreate, Api::stream_create(&stream));
      for (auto& e : done) Api::check(dev, Api::kEventCreate, Api::event_create_untimed(&e));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Staging() { release(); }
  void release() {
    for (auto& e : done) {
      if (e) (void)Api::event_destroy(e);
      e = {};
    }
    if (stream) (void)Api::stream_destroy(stream);
    stream = {};
  }
};

template <class Api>
GpuDevice<Api>::GpuDevice(DeviceInfo info, int ordinal, GpuOptions options)
    : Device(std::move(info)), ordinal_(ordinal), options_(options) {
  mutable_info().kind = DeviceKind::gpu;
  mutable_info().backend = std::string(Api::kBackend);
  mutable_info().time_source = TimeSource::measured;
  set_current();
  int smem = 0;
  Api::check(name(), Api::kDeviceGetAttribute, Api::max_shared_memory_per_block(&smem, ordinal_));
  max_shared_bytes_ = static_cast<std::size_t>(smem);
  for (int i = 0; i < std::max(1, options_.queues); ++i) queues_.push_back(std::make_unique<Queue>(name()));
  const std::size_t chunk = std::max<std::size_t>(options_.staging_chunk_bytes, 4096);
  inbound_ = std::make_unique<Staging>(name(), chunk);
  outbound_ = std::make_unique<Staging>(name(), chunk);
  if (Api::async_engine_count(&copy_engines_, ordinal_) != Api::kSuccess) {
    (void)Api::get_last_error();  // not reported (HIP documents it for CUDA only): assume one
    copy_engines_ = 1;
  }
  char bus[32] = {};
  if (Api::pci_bus_id(bus, sizeof bus, ordinal_) == Api::kSuccess) pci_bus_id_ = bus;
  add_host_pinner({std::string(Api::kBackend),
                   [](void* p, std::size_t n, std::string& error) {
                     const auto rc = Api::host_register(p, n);
                     if (rc == Api::kSuccess) return true;
                     (void)Api::get_last_error();  // reported here, not by the next call
                     error = std::string(Api::kHostRegister) + ": " + Api::error_string(rc);
                     return false;
                   },
                   [](void* p) {
                     if (Api::host_unregister(p) != Api::kSuccess) (void)Api::get_last_error();
                   }});
  std::string why;
  meter_ = Api::PowerMeter::load(&why);
  if (!meter_) {
    spdlog::info("{}: no {} energy readings: {}", this->name(), Api::kMeterName, why);
  } else if (auto e = meter_->total_energy_j(pci_bus_id_)) {
    energy_at_start_j_ = *e;
  }
}

template <class Api>
GpuDevice<Api>::~GpuDevice() {
  (void)Api::set_device(ordinal_);
  queues_.clear();
  inbound_.reset();
  outbound_.reset();
}

template <class Api>
void GpuDevice<Api>::set_current() const {
  Api::check(name(), Api::kSetDevice, Api::set_device(ordinal_));
}

template <class Api>
typename GpuDevice<Api>::Queue& GpuDevice<Api>::queue(int index) {
  return *queues_[static_cast<std::size_t>(std::max(0, index)) % queues_.size()];
}

template <class Api>
typename GpuDevice<Api>::Staging& GpuDevice<Api>::staging(CopyDirection direction) const {
  return direction == CopyDirection::inbound ? *inbound_ : *outbound_;
}

template <class Api>
bool GpuDevice<Api>::supports(kernels::OpKind op) const {
  switch (op) {
    case kernels::OpKind::spmm:
    case kernels::OpKind::gemm:
    case kernels::OpKind::window_attention:
    case kernels::OpKind::softmax:
    case kernels::OpKind::layer_norm:
      return true;
  }
  return false;
}

template <class Api>
BufferPtr GpuDevice<Api>::allocate(std::size_t bytes, AllocMode) {
  return std::make_unique<VendorBuffer>(*this, bytes);
}

template <class Api>
typename GpuDevice<Api>::VendorBuffer& GpuDevice<Api>::on_device(const hw::Buffer* b, const char* arg) const {
  auto* vb = dynamic_cast<VendorBuffer*>(const_cast<hw::Buffer*>(b));
  if (!vb || &vb->device() != this) throw InputError(name(), std::string(arg) + ": buffer is not on this device");
  return *vb;
}

template <class Api>
Event GpuDevice<Api>::timed(Queue& q, const std::function<void()>& enqueue) {
  Api::check(name(), Api::kEventRecord, Api::event_record(q.start, q.stream));
  enqueue();
  Api::check(name(), Api::kEventRecord, Api::event_record(q.stop, q.stream));
  Api::check(name(), Api::kEventSynchronize, Api::event_synchronize(q.stop));
  float ms = 0.0f;
  Api::check(name(), Api::kEventElapsedTime, Api::event_elapsed_ms(&ms, q.start, q.stop));
  Event e;
  e.source = TimeSource::measured;
  e.end_s = now_s();
  e.start_s = e.end_s - ms * 1e-3;
  return e;
}

template <class Api>
Event GpuDevice<Api>::do_launch(const KernelLaunch& l, std::span<const Event>, int queue_index) {
  if (!supports(l.shape.kind)) {
    throw DeviceError(name(), std::string(kernels::to_string(l.shape.kind)) + " is not supported on the " +
                                  std::string(Api::kBackend) + " backend");
  }
  set_current();
  const int qi = std::max(0, queue_index) % queue_count();
  Queue& q = queue(qi);
  std::lock_guard lock(q.mutex);
  // `after` needs no wait: every Event is complete when returned (hw/event.h).
  Event e = timed(q, [&] {
    switch (l.shape.kind) {
      case kernels::OpKind::spmm: run_spmm(qi, q.stream, l); break;
      case kernels::OpKind::gemm: run_gemm(qi, q.stream, l); break;
      case kernels::OpKind::window_attention: run_window_attention(q.stream, l); break;
      case kernels::OpKind::softmax: run_softmax(q.stream, l); break;
      case kernels::OpKind::layer_norm: run_layer_norm(q.stream, l); break;
    }
  });
  on_device(l.output, "output").mark_written();
  return e;
}

template <class Api>
Event GpuDevice<Api>::do_copy_from_host(hw::Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                                        std::span<const Event>) {
  auto& d = on_device(&dst, "copy_from_host dst");
  set_current();
  Staging& st = staging(CopyDirection::inbound);
  std::lock_guard lock(st.mutex);
  const std::size_t chunk = st.slot[0].size();
  Event e;
  e.start_s = now_s();
  if (host_memory_pinned(src.data(), src.size())) {  // a pinned region: one DMA straight from it
    Api::check(name(), Api::kMemcpyH2D,
               Api::memcpy_h2d_async(d.template ptr<std::byte>() + offset, src.data(), src.size(),
                                     st.stream));
    Api::check(name(), Api::kStreamSynchronize, Api::stream_synchronize(st.stream));
    e.end_s = now_s();
    d.mark_written();
    return e;
  }
  bool used[2] = {false, false};
  for (std::size_t pos = 0, c = 0; pos < src.size(); pos += chunk, ++c) {
    const std::size_t s = c % 2, len = std::min(chunk, src.size() - pos);
    if (used[s]) Api::check(name(), Api::kEventSynchronize, Api::event_synchronize(st.done[s]));
    std::memcpy(st.slot[s].data(), src.data() + pos, len);
    Api::check(name(), Api::kMemcpyH2D,
               Api::memcpy_h2d_async(d.template ptr<std::byte>() + offset + pos, st.slot[s].data(), len, st.stream));
    Api::check(name(), Api::kEventRecord, Api::event_record(st.done[s], st.stream));
    used[s] = true;
  }
  Api::check(name(), Api::kStreamSynchronize, Api::stream_synchronize(st.stream));
  e.end_s = now_s();
  d.mark_written();
  return e;
}

template <class Api>
Event GpuDevice<Api>::do_copy_to_host(const hw::Buffer& src, std::span<std::byte> dst, std::size_t offset,
                                      std::span<const Event>) {
  auto& s = on_device(&src, "copy_to_host src");
  set_current();
  Staging& st = staging(CopyDirection::outbound);
  std::lock_guard lock(st.mutex);
  const std::size_t chunk = st.slot[0].size();
  const std::size_t chunks = (dst.size() + chunk - 1) / chunk;
  Event e;
  e.start_s = now_s();
  if (host_memory_pinned(dst.data(), dst.size())) {  // a pinned region: one DMA straight into it
    Api::check(name(), Api::kMemcpyD2H,
               Api::memcpy_d2h_async(dst.data(), s.template ptr<const std::byte>() + offset,
                                     dst.size(), st.stream));
    Api::check(name(), Api::kStreamSynchronize, Api::stream_synchronize(st.stream));
    e.end_s = now_s();
    return e;
  }
  auto issue = [&](std::size_t c) {
    const std::size_t slot = c % 2, pos = c * chunk, len = std::min(chunk, dst.size() - pos);
    Api::check(name(), Api::kMemcpyD2H,
               Api::memcpy_d2h_async(st.slot[slot].data(), s.template ptr<const std::byte>() + offset + pos, len,
                                     st.stream));
    Api::check(name(), Api::kEventRecord, Api::event_record(st.done[slot], st.stream));
  };
  if (chunks > 0) issue(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) issue(c + 1);  // its slot was emptied by the previous iteration
    Api::check(name(), Api::kEventSynchronize, Api::event_synchronize(st.done[c % 2]));
    const std::size_t pos = c * chunk, len = std::min(chunk, dst.size() - pos);
    std::memcpy(dst.data() + pos, st.slot[c % 2].data(), len);
  }
  e.end_s = now_s();
  return e;
}

template <class Api>
bool GpuDevice<Api>::can_copy_peer(const GpuDevice& peer) const {
  if (!options_.allow_p2p || !peer.options_.allow_p2p) return false;
  int can = 0;
  if (Api::can_access_peer(&can, ordinal_, peer.ordinal_) != Api::kSuccess) {
    (void)Api::get_last_error();
    return false;
  }
  return can != 0;
}

template <class Api>
Event GpuDevice<Api>::do_copy_to_peer(const hw::Buffer& src, hw::Buffer& dst, const hw::CopyRegion& region,
                                      std::span<const Event> after) {
  auto* peer = dynamic_cast<GpuDevice*>(&dst.device());
  const bool same = peer == this;
  if (!peer || (!same && !can_copy_peer(*peer))) return copy_to_peer_staged(src, dst, region, after);
  auto& s = on_device(&src, "copy_to_peer src");
  auto& d = dynamic_cast<VendorBuffer&>(dst);
  set_current();
  if (!same) {
    std::lock_guard lock(peers_mutex_);
    if (std::find(peers_enabled_.begin(), peers_enabled_.end(), peer->ordinal()) == peers_enabled_.end()) {
      const typename Api::Error rc = Api::enable_peer_access(peer->ordinal());
      if (Api::peer_access_already_enabled(rc)) {
        (void)Api::get_last_error();
      } else {
        Api::check(name(), Api::kEnablePeerAccess, rc);
      }
      peers_enabled_.push_back(peer->ordinal());
    }
  }
  void* to = static_cast<std::byte*>(d.device_ptr()) + region.dst_offset;
  const void* from = static_cast<const std::byte*>(s.device_ptr()) + region.src_offset;
  const Event e = copy_on_staging_stream(CopyDirection::outbound, [&](Stream stream) {
    const typename Api::Error rc =
        same ? Api::memcpy_d2d_async(to, from, region.bytes, stream)
             : Api::memcpy_peer_async(to, peer->ordinal(), from, ordinal_, region.bytes, stream);
    Api::check(name(), same ? Api::kMemcpyD2D : Api::kMemcpyPeer, rc);
  });
  d.mark_written();
  return e;
}

template <class Api>
std::optional<Event> GpuDevice<Api>::copy_from_ipc_memory(hw::Buffer& dst,
                                                          const DeviceIpcMemory& src,
                                                          std::size_t src_offset,
                                                          std::size_t bytes) {
  if (src.backend() != Api::kBackend || src.device_id() != ordinal_) return std::nullopt;
  auto& d = on_device(&dst, "copy_from_ipc_memory dst");
  check_copy_range(name() + ": copy_from_ipc_memory dst", 0, bytes, d.size_bytes());
  check_copy_range(name() + ": copy_from_ipc_memory src", src_offset, bytes, src.size());
  set_current();
  void* to = d.device_ptr();
  const void* from = static_cast<const std::byte*>(src.device_ptr()) + src_offset;
  const Event e = copy_on_staging_stream(CopyDirection::inbound, [&](Stream stream) {
    Api::check(name(), Api::kMemcpyD2D, Api::memcpy_d2d_async(to, from, bytes, stream));
  });
  d.mark_written();
  return e;
}

template <class Api>
std::optional<Event> GpuDevice<Api>::copy_to_ipc_memory(const hw::Buffer& src,
                                                        std::size_t src_offset,
                                                        const DeviceIpcMemory& dst,
                                                        std::size_t dst_offset, std::size_t bytes) {
  if (dst.backend() != Api::kBackend || dst.device_id() != ordinal_) return std::nullopt;
  const auto& s = on_device(&src, "copy_to_ipc_memory src");
  check_copy_range(name() + ": copy_to_ipc_memory src", src_offset, bytes, s.size_bytes());
  check_copy_range(name() + ": copy_to_ipc_memory dst", dst_offset, bytes, dst.size());
  set_current();
  const void* from = static_cast<const std::byte*>(s.device_ptr()) + src_offset;
  // The region is the client's output memory, opened writable; DeviceIpcMemory hands out its
  // address as const because most users only read it.
  void* to = static_cast<std::byte*>(const_cast<void*>(dst.device_ptr())) + dst_offset;
  return copy_on_staging_stream(CopyDirection::outbound, [&](Stream stream) {
    Api::check(name(), Api::kMemcpyD2D, Api::memcpy_d2d_async(to, from, bytes, stream));
  });
}

template <class Api>
Event GpuDevice<Api>::copy_on_staging_stream(CopyDirection direction, const std::function<void(Stream)>& enqueue) {
  Staging& st = staging(direction);
  std::lock_guard lock(st.mutex);
  Event e;
  e.start_s = now_s();
  enqueue(st.stream);
  Api::check(name(), Api::kStreamSynchronize, Api::stream_synchronize(st.stream));
  e.end_s = now_s();
  return e;
}

template <class Api>
std::optional<EnergyReport> GpuDevice<Api>::energy() const {
  if (!meter_) return std::nullopt;
  const auto total = meter_->total_energy_j(pci_bus_id_);
  if (!total) return std::nullopt;
  EnergyReport r;
  r.execute_j = *total - energy_at_start_j_;
  return r;
}

}  // namespace dype::hw
