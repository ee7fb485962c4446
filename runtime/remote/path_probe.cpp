#include "runtime/remote/path_probe.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "runtime/remote/stage_protocol.h"

namespace dype::rt::remote {

PathFit probe_path(std::shared_ptr<UcxContext> context, const HostPort& where, const std::string& token,
                   const std::vector<std::size_t>& sizes, int reps, ChannelOptions options) {
  if (sizes.size() < 2) throw InputError("sizes", "need at least two sizes to fit a line");
  if (reps < 1) throw InputError("reps", "must be >= 1");
  UcxChannel ch = UcxChannel::connect(std::move(context), where, options);
  ch.send(Activation::bytes_of(0, 0, encode(StageProbe{.token = token})));
  auto hello = ch.recv();
  if (!hello || hello->dtype() != Dtype::u8) throw Error("probe of " + where.str() + ": no answer to the probe");
  const StageSetupAck ack = decode_setup_ack(hello->bytes());
  if (!ack.ok) throw Error("probe of " + where.str() + " refused: " + ack.message);
  PathFit fit;
  fit.where = ack.where;
  std::uint64_t seq = 0;
  for (std::size_t bytes : sizes) {
    bytes = std::max<std::size_t>(bytes, 1);
    const std::vector<std::byte> payload(bytes, std::byte{0x5a});
    std::vector<double> t;
    for (int r = 0; r <= reps; ++r) {  // the first is a warm-up (registration, rendezvous set-up)
      Activation a = Activation::bytes_of(0, ++seq, payload);  // built outside the timed region
      const auto t0 = std::chrono::steady_clock::now();
      ch.send(std::move(a));
      auto back = ch.recv();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!back) throw Error("probe of " + where.str() + ": the server closed the link");
      if (r > 0) t.push_back(s);
    }
    std::sort(t.begin(), t.end());
    fit.points.push_back({bytes, t[t.size() / 2], t.front()});
  }
  ch.close();
  // Least squares over the medians, each point weighted by 1 / t^2 (relative errors): the
  // largest sizes would otherwise decide the intercept alone.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : fit.points) {
    const double x = static_cast<double>(p.bytes), y = p.median_s, w = 1.0 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  fit.round_trip_s = std::max(0.0, (sy - slope * sx) / sw);
  fit.bytes_per_s = slope > 0 ? 1.0 / slope : 0.0;
  fit.latency_per_end_s = fit.round_trip_s / 4;
  return fit;
}

}  // namespace dype::rt::remote
