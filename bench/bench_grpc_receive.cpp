// bench_grpc_receive: what taking a large ModelInferRequest off gRPC costs dype-serve, in one
// process, against a generated server's way and against memcpy. The request is the serving path's
// (x of 68,471 x 128 FP32, 35 MB, as raw_input_contents, plus its header), lying in gRPC slices as
// HTTP/2 hands them over: DATA frame payloads of at most 16 KiB (gRPC's default frame size) with a
// 9-byte frame header between them in the receive buffers, so each slice starts at any alignment.
//   dype         parse_infer_request: x copied once out of the slices into a receive-pool buffer,
//                checked for NaN/Inf on the way (copy_all_finite_f32)
//   block copy   the same copy with memcpy, then all_finite_f32 over each block (dype's way before)
//   protobuf     grpc::SerializationTraits<ModelInferRequest>::Deserialize, what a generated
//                server runs (x into a std::string); no NaN/Inf check
//   memcpy       x into a buffer kept between reps, and into a fresh one (page faults included: the
//                unit bench/run_serving_path.sh states its gRPC raw target in)
// The variants run interleaved, REPS rounds, so this shared machine's phases fall on all alike.
// Prints each one's median and its ratio to dype's. All figures are measured on this CPU.
//
//   bench_grpc_receive [--nodes 68471] [--features 128] [--reps 41]
#include <grpcpp/impl/codegen/proto_utils.h>  // SerializationTraits for protobuf messages

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/kserve/finite_check.h"
#include "runtime/daemon/proto/grpc_service.pb.h"
#include "runtime/host_buffer_pool.h"

namespace {
using Clock = std::chrono::steady_clock;
using namespace dype;

constexpr std::size_t kFrame = 16 * 1024, kFrameHeader = 9;

// `bytes` laid out as HTTP/2 DATA frames in one receive buffer, and the slices of their payloads.
struct Framed {
  std::vector<char> wire;
  std::vector<std::pair<std::size_t, std::size_t>> payloads;  // offset in wire, size
  grpc::ByteBuffer buffer() const {
    std::vector<grpc::Slice> s;
    s.reserve(payloads.size());
    for (auto [at, n] : payloads) s.emplace_back(wire.data() + at, n, grpc::Slice::STATIC_SLICE);
    return grpc::ByteBuffer(s.data(), s.size());
  }
};

Framed frame(const std::string& bytes) {
  Framed f;
  f.wire.reserve(bytes.size() + (bytes.size() / kFrame + 1) * kFrameHeader);
  for (std::size_t at = 0; at < bytes.size(); at += kFrame) {
    const std::size_t n = std::min(kFrame, bytes.size() - at);
    f.wire.insert(f.wire.end(), kFrameHeader, '\0');
    f.payloads.emplace_back(f.wire.size(), n);
    f.wire.insert(f.wire.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
                  bytes.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  return f;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const auto nodes = static_cast<std::size_t>(std::stoll(bench::arg(argc, argv, "--nodes", "68471")));
  const auto feats = static_cast<std::size_t>(std::stoll(bench::arg(argc, argv, "--features", "128")));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "41"));
  std::vector<float> x(nodes * feats);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1009) * 0.01f - 5.0f;
  const std::size_t x_bytes = x.size() * sizeof(float);

  inference::ModelInferRequest r;
  r.set_model_name("gcn");
  (*r.mutable_parameters())["graph_id"].set_string_param("debian-deps");
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(static_cast<std::int64_t>(nodes));
  in->add_shape(static_cast<std::int64_t>(feats));
  r.add_outputs()->set_name("y");
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x_bytes));
  const std::string bytes = r.SerializeAsString();
  const std::size_t x_at = bytes.size() - x_bytes;
  const Framed wire = frame(bytes);
  r.Clear();

  std::vector<char> kept(x_bytes);
  std::vector<std::byte> block(x_bytes);
  const std::vector<std::pair<const char*, std::function<bool()>>> variants = {
      {"dype", [&] {
         inference::ModelInferRequest header;
         rt::daemon::ReceivedContents raw;
         rt::daemon::parse_infer_request(wire.buffer(), header, raw);
         return raw.entries.at(0).finite_f32 && raw.entries[0].size == x_bytes;
       }},
      {"block copy", [&] {
         // x is the request's last field (protobuf writes fields in number order), so it starts
         // x_bytes before the end of the stream of payloads.
         std::size_t stream_at = 0, done = 0;
         bool ok = true;
         for (auto [at, n] : wire.payloads) {
           const std::size_t from = std::max(stream_at, x_at) - stream_at;
           stream_at += n;
           if (from >= n) continue;
           std::memcpy(block.data() + done, wire.wire.data() + at + from, n - from);
           ok &= rt::daemon::all_finite_f32(block.data() + done / 4 * 4, (done + n - from) / 4 - done / 4);
           done += n - from;
         }
         return ok && done == x_bytes;
       }},
      {"protobuf", [&] {
         grpc::ByteBuffer b = wire.buffer();
         inference::ModelInferRequest m;
         return grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&b, &m).ok() &&
                m.raw_input_contents(0).size() == x_bytes;
       }},
      {"memcpy kept", [&] {
         std::memcpy(kept.data(), x.data(), x_bytes);
         return kept[x_bytes / 2] == reinterpret_cast<const char*>(x.data())[x_bytes / 2];
       }},
      {"memcpy fresh", [&] {
         std::unique_ptr<char[]> fresh(new char[x_bytes]);
         std::memcpy(fresh.get(), x.data(), x_bytes);
         return fresh[x_bytes / 2] == reinterpret_cast<const char*>(x.data())[x_bytes / 2];
       }},
  };
  std::vector<std::vector<double>> t(variants.size());
  for (int rep = -1; rep < reps; ++rep)  // one round of warm-up (the pool's first buffer, faults)
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const auto t0 = Clock::now();
      if (!variants[v].second()) {
        std::fprintf(stderr, "bench_grpc_receive: %s received x wrongly\n", variants[v].first);
        return 1;
      }
      if (rep >= 0) t[v].push_back(ms_since(t0));
    }
  std::printf("== taking x (%zu bytes in %zu HTTP/2 frames) off gRPC, median of %d, load %s\n",
              x_bytes, wire.payloads.size(), reps, bench::loadavg().c_str());
  const double dype_ms = bench::percentile(t[0], 0.5);
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const double ms = bench::percentile(t[v], 0.5);
    std::printf("  %-13s %7.2f ms  (%.2fx dype's time, measured)\n", variants[v].first, ms, ms / dype_ms);
  }
  return 0;
}
