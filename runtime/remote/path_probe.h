#pragma once
// Measures the path to another host's stage server over UCX (dype-calibrate --peer): for each size,
// the time from sending a frame of that many bytes until the server's one-byte acknowledgement
// (stage_protocol.h's probe link), median over `reps` after one warm-up; then a least-squares line
// t(bytes) = t0 + bytes / bandwidth over the sizes, weighted by relative error. The planner's NIC model (hw::Topology::nic_leg_s)
// charges a message latency at each end and the slower NIC's bandwidth, so the fit is reported as
// both ends' latency = t0 / 4 (t0 is a round trip: the payload's way and the acknowledgement's)
// and nic bandwidth = the fitted one: what the path reached end to end, not a NIC's line rate.
//
//   auto fit = probe_path(UcxContext::create(), parse_host_port("10.0.0.7:7102"), token, {4096, 1 << 20}, 20);
//   std::printf("%.1f Gb/s, %.1f us\n", fit.bytes_per_s * 8 / 1e9, fit.latency_per_end_s * 1e6);
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/remote/ucx_channel.h"

namespace dype::rt::remote {

struct PathPoint {
  std::size_t bytes = 0;
  double median_s = 0.0;  // send -> acknowledgement
  double min_s = 0.0;
};

struct PathFit {
  std::string where;  // the server's host name
  std::vector<PathPoint> points;
  double round_trip_s = 0.0;        // the fit's intercept t0
  double bytes_per_s = 0.0;         // 1 / the fit's slope
  double latency_per_end_s = 0.0;   // t0 / 4
};

// Throws ChannelError when the server cannot be reached, dype::Error naming why it refused (a
// wrong token), InputError for sizes < 2 or reps < 1.
PathFit probe_path(std::shared_ptr<UcxContext> context, const HostPort& where, const std::string& token,
                   const std::vector<std::size_t>& sizes, int reps, ChannelOptions options = {});

}  // namespace dype::rt::remote
