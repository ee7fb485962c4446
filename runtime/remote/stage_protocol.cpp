#include "runtime/remote/stage_protocol.h"

#include <bit>
#include <cstring>
#include <limits>

namespace dype::rt::remote {

static_assert(std::endian::native == std::endian::little, "stage protocol assumes little-endian");

namespace {

// Bounds on what a description may declare, checked before anything is sized from it.
constexpr std::uint32_t kMaxString = 1 << 16;
constexpr std::uint32_t kMaxDevices = 256;
constexpr std::uint32_t kMaxTensors = 16;
constexpr std::int64_t kMaxRows = std::numeric_limits<std::int32_t>::max();

class Writer {
 public:
  explicit Writer(StageMsg kind) {
    u8(static_cast<std::uint8_t>(kind));
    u32(kStageProtocolVersion);
  }
  template <typename T>
  void put(T v) {
    append(&v, sizeof v);
  }
  void u8(std::uint8_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void i32(std::int32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void i64(std::int64_t v) { put(v); }
  void f64(double v) { put(v); }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    append(s.data(), s.size());
  }
  template <typename T>
  void array(const std::vector<T>& v) {
    u64(v.size());
    append(v.data(), v.size() * sizeof(T));
  }
  void append(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    if (n) out_.insert(out_.end(), b, b + n);
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, StageMsg expect, const char* what) : in_(in), what_(what) {
    const auto kind = u8("kind");
    if (kind != static_cast<std::uint8_t>(expect))
      fail("kind", "is " + std::to_string(kind) + ", expected " + std::to_string(static_cast<int>(expect)));
    const auto version = u32("version");
    if (version != kStageProtocolVersion)
      fail("version", std::to_string(version) + ", this build speaks " + std::to_string(kStageProtocolVersion));
  }
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw StageProtocolError(std::string("stage ") + what_ + "." + field + ": " + problem);
  }
  template <typename T>
  T get(const char* field) {
    if (in_.size() - at_ < sizeof(T)) fail(field, "truncated (" + std::to_string(in_.size()) + " bytes in all)");
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::uint8_t u8(const char* f) { return get<std::uint8_t>(f); }
  std::uint32_t u32(const char* f) { return get<std::uint32_t>(f); }
  std::int32_t i32(const char* f) { return get<std::int32_t>(f); }
  std::uint64_t u64(const char* f) { return get<std::uint64_t>(f); }
  std::int64_t i64(const char* f) { return get<std::int64_t>(f); }
  double f64(const char* f) { return get<double>(f); }
  std::string str(const char* field) {
    const auto n = u32(field);
    if (n > kMaxString) fail(field, "length " + std::to_string(n) + " exceeds " + std::to_string(kMaxString));
    if (in_.size() - at_ < n) fail(field, "truncated");
    std::string s(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> array(const char* field, std::uint64_t expect) {
    const auto n = u64(field);
    if (n != expect) fail(field, "has " + std::to_string(n) + " entries, expected " + std::to_string(expect));
    if ((in_.size() - at_) / sizeof(T) < n) fail(field, "truncated");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  void end() const {
    if (at_ != in_.size()) fail("end", std::to_string(in_.size() - at_) + " bytes left over");
  }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  const char* what_;
};

void write_graph(Writer& w, const Graph& g) {
  w.i64(g.nodes);
  w.i64(g.nnz);
  w.i32(g.rows_per_node);
  w.f64(g.degree_skew);
  w.array(g.indptr);
  w.array(g.indices);
  w.array(g.values);
}

std::shared_ptr<const Graph> read_graph(Reader& r) {
  auto g = std::make_shared<Graph>();
  g->nodes = r.i64("graph.nodes");
  g->nnz = r.i64("graph.nnz");
  g->rows_per_node = r.i32("graph.rows_per_node");
  g->degree_skew = r.f64("graph.degree_skew");
  if (g->nodes <= 0 || g->nodes > kMaxRows) r.fail("graph.nodes", std::to_string(g->nodes) + " is not in [1, 2^31)");
  if (g->rows_per_node != 1 && g->rows_per_node != 2) r.fail("graph.rows_per_node", std::to_string(g->rows_per_node) + " is not 1 or 2");
  if (g->nnz < 0 || g->nnz > kMaxRows) r.fail("graph.nnz", std::to_string(g->nnz) + " is not in [0, 2^31)");
  if (!(g->degree_skew >= 1.0 && g->degree_skew < 1e12)) r.fail("graph.degree_skew", "is not a finite value >= 1");
  const auto csr_rows = static_cast<std::uint64_t>(g->csr_rows());
  g->indptr = r.array<std::int32_t>("graph.indptr", csr_rows + 1);
  g->indices = r.array<std::int32_t>("graph.indices", static_cast<std::uint64_t>(g->nnz));
  g->values = r.array<float>("graph.values", static_cast<std::uint64_t>(g->nnz));
  if (g->indptr.front() != 0 || g->indptr.back() != g->nnz) r.fail("graph.indptr", "does not run from 0 to nnz");
  for (std::size_t i = 1; i < g->indptr.size(); ++i)
    if (g->indptr[i] < g->indptr[i - 1]) r.fail("graph.indptr", "decreases at row " + std::to_string(i - 1));
  for (std::int32_t c : g->indices)
    if (c < 0 || c >= g->nodes) r.fail("graph.indices", "has column " + std::to_string(c) + " outside [0, nodes)");
  g->id = Graph::fresh_id();
  return g;
}

// FNV-1a, 64 bits.
struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  template <typename T>
  void value(T v) { bytes(&v, sizeof v); }
};

}  // namespace

std::vector<std::byte> encode(const StageSetup& m) {
  Writer w(StageMsg::setup);
  w.str(m.model);
  w.u64(m.model_digest);
  w.i32(m.first);
  w.i32(m.last);
  w.u32(static_cast<std::uint32_t>(m.devices.size()));
  for (const auto& d : m.devices) w.str(d);
  w.str(m.token);
  return w.take();
}

std::vector<std::byte> encode(const StageProbe& m) {
  Writer w(StageMsg::probe);
  w.str(m.token);
  return w.take();
}

std::vector<std::byte> encode(const StageSetupAck& m) {
  Writer w(StageMsg::setup_ack);
  w.u8(m.ok ? 1 : 0);
  w.str(m.message);
  w.str(m.where);
  w.u32(m.graph_cache);
  return w.take();
}

std::vector<std::byte> encode(const StageRequestHead& m, const Graph* with_graph) {
  Writer w(StageMsg::request);
  w.u64(m.epoch);
  w.u64(m.seq);
  w.i32(m.first);
  w.i32(m.last);
  w.i64(m.rows);
  w.i64(m.window);
  w.u64(m.graph_id);
  w.u32(m.inputs);
  w.u8(with_graph ? 1 : 0);
  if (with_graph) write_graph(w, *with_graph);
  return w.take();
}

std::vector<std::byte> encode(const StageReplyHead& m) {
  Writer w(StageMsg::reply);
  w.u64(m.seq);
  w.u8(static_cast<std::uint8_t>(m.error));
  w.str(m.message);
  w.u32(m.outputs);
  w.f64(m.stage_s);
  return w.take();
}

StageMsg message_kind(std::span<const std::byte> frame) {
  if (frame.empty()) throw StageProtocolError("stage message: empty frame");
  const auto k = static_cast<std::uint8_t>(frame[0]);
  if (k < 1 || k > 5) throw StageProtocolError("stage message.kind: unknown kind " + std::to_string(k));
  return static_cast<StageMsg>(k);
}

StageSetup decode_setup(std::span<const std::byte> frame) {
  Reader r(frame, StageMsg::setup, "setup");
  StageSetup m;
  m.model = r.str("model");
  m.model_digest = r.u64("model_digest");
  m.first = r.i32("first");
  m.last = r.i32("last");
  const auto n = r.u32("devices");
  if (n == 0 || n > kMaxDevices) r.fail("devices", std::to_string(n) + " devices (1 to " + std::to_string(kMaxDevices) + ")");
  for (std::uint32_t i = 0; i < n; ++i) m.devices.push_back(r.str("devices[]"));
  m.token = r.str("token");
  r.end();
  if (m.first < 0 || m.last < m.first) r.fail("first", "kernels [" + std::to_string(m.first) + ", " + std::to_string(m.last) + "] are empty");
  return m;
}

StageProbe decode_probe(std::span<const std::byte> frame) {
  Reader r(frame, StageMsg::probe, "probe");
  StageProbe m;
  m.token = r.str("token");
  r.end();
  return m;
}

StageSetupAck decode_setup_ack(std::span<const std::byte> frame) {
  Reader r(frame, StageMsg::setup_ack, "setup_ack");
  StageSetupAck m;
  m.ok = r.u8("ok") != 0;
  m.message = r.str("message");
  m.where = r.str("where");
  m.graph_cache = r.u32("graph_cache");
  r.end();
  return m;
}

StageRequestHead decode_request(std::span<const std::byte> frame) {
  Reader r(frame, StageMsg::request, "request");
  StageRequestHead m;
  m.epoch = r.u64("epoch");
  m.seq = r.u64("seq");
  m.first = r.i32("first");
  m.last = r.i32("last");
  m.rows = r.i64("rows");
  m.window = r.i64("window");
  m.graph_id = r.u64("graph_id");
  m.inputs = r.u32("inputs");
  const bool with_graph = r.u8("with_graph") != 0;
  if (m.rows <= 0 || m.rows > kMaxRows) r.fail("rows", std::to_string(m.rows) + " is not in [1, 2^31)");
  if (m.window < 0) r.fail("window", std::to_string(m.window) + " is negative");
  if (m.inputs == 0 || m.inputs > kMaxTensors) r.fail("inputs", std::to_string(m.inputs) + " tensors (1 to " + std::to_string(kMaxTensors) + ")");
  if (with_graph) {
    if (m.graph_id == 0) r.fail("graph_id", "is 0 but a graph follows");
    m.graph = read_graph(r);
    if (m.graph->nodes != m.rows) r.fail("graph.nodes", std::to_string(m.graph->nodes) + " nodes for " + std::to_string(m.rows) + " rows");
  }
  r.end();
  return m;
}

StageReplyHead decode_reply(std::span<const std::byte> frame) {
  Reader r(frame, StageMsg::reply, "reply");
  StageReplyHead m;
  m.seq = r.u64("seq");
  const auto e = r.u8("error");
  if (e > static_cast<std::uint8_t>(StageErrorKind::graph_unknown)) r.fail("error", "unknown kind " + std::to_string(e));
  m.error = static_cast<StageErrorKind>(e);
  m.message = r.str("message");
  m.outputs = r.u32("outputs");
  if (m.outputs > kMaxTensors) r.fail("outputs", std::to_string(m.outputs) + " tensors (at most " + std::to_string(kMaxTensors) + ")");
  m.stage_s = r.f64("stage_s");
  if (!(m.stage_s >= 0.0 && m.stage_s < 1e9)) r.fail("stage_s", "is not a finite time >= 0");
  r.end();
  return m;
}

std::uint64_t model_digest(const Model& model) {
  Fnv f;
  f.value(static_cast<int>(model.family()));
  f.value(model.num_kernels());
  for (const Step& s : model.steps()) {
    f.value(static_cast<int>(s.op));
    f.value(s.qkv);
    f.value(s.in_cols);
    f.value(s.out_cols);
    f.value(static_cast<int>(s.epilogue));
    f.value(static_cast<int>(s.residual));
    f.value(s.carry_cols);
    for (int w : s.weights) f.value(w);
  }
  f.value(model.spec().heads);
  f.value(model.spec().layer_norm_eps);
  for (int i = 0; i < model.num_weights(); ++i) {
    const HostTensor& w = model.weight(i);
    f.value(w.rows);
    f.value(w.cols);
    if (!w.size_only) f.bytes(w.data.data(), w.data.size() * sizeof(float));
  }
  return f.h;
}

}  // namespace dype::rt::remote
