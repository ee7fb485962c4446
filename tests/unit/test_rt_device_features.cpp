// Features the engine does not copy: left in GPU memory (the CUDA shared-memory extension), on the
// paths that need no GPU, and read where a client mapped them (system shared memory).
// Device features:
// the request keeps only their shape until a stage not on that GPU asks for them, then reads them
// to the host once; the engine's answer equals the one for the same features sent on the host; the
// daemon's request builder checks them where they lie and names a NaN's row and column. The
// memory here is host memory behind hw::DeviceIpcMemory under a backend no device claims, so
// every stage takes the host path; the in-place copy on a real GPU is test_gpu_device.cpp's.
// Answers asked for in GPU memory are written there through the host on the same terms.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph/generators.h"
#include "hw/device_ipc_memory.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/engine.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planner.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

// Another process's memory as the daemon would see it, held in host memory: reads and finiteness
// checks are counted, so a test can tell which path touched it.
class HostHeldIpcMemory final : public hw::DeviceIpcMemory {
 public:
  explicit HostHeldIpcMemory(std::size_t bytes) : bytes_(bytes, std::byte{0}) {}
  std::size_t size() const override { return bytes_.size(); }
  int device_id() const override { return 0; }
  std::string_view backend() const override { return "host-held"; }
  const void* device_ptr() const override { return bytes_.data(); }
  bool all_finite_f32(std::size_t offset, std::size_t count) const override {
    checks++;
    std::vector<float> v(count);
    read(offset, v.data(), count * sizeof(float));
    reads--;  // the check is not a read to the host
    for (float f : v)
      if (!std::isfinite(f)) return false;
    return true;
  }
  void read(std::size_t offset, void* dst, std::size_t n) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset)
      throw InputError("offset", "past the end");
    reads++;
    std::memcpy(dst, bytes_.data() + offset, n);
  }
  void write(std::size_t offset, const void* src, std::size_t n) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset)
      throw InputError("offset", "past the end");
    std::memcpy(const_cast<std::byte*>(bytes_.data()) + offset, src, n);
  }
  mutable std::atomic<int> reads{0};
  mutable std::atomic<int> checks{0};

 private:
  std::vector<std::byte> bytes_;
};

// A GCN 16 -> 8 -> 8 served on an emulated system, with features for `nodes` nodes and the host
// request whose answer is the reference.
struct Served {
  Served(int gpus, int fpgas, std::int64_t nodes, std::uint64_t seed)
      : sys(testing::emu_system(gpus, fpgas)),
        m(Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = seed})),
        g(Graph::from_edges(random_graph(nodes, nodes * 8, seed), true)),
        x(make_tensor(nodes, 16, kernels::generate_features(nodes, 16, seed + 7))),
        host(Request::gnn(g, x)),
        e(m, std::make_shared<SchedPlanner>(m, sys), host.characteristics(), {}) {}
  hw::System sys;
  Model m;
  std::shared_ptr<const Graph> g;
  HostTensor x;
  Request host;
  Engine e;
};

// The features start inside the region, as a client may place them.
constexpr std::size_t kOffset = 256;

std::shared_ptr<HostHeldIpcMemory> holding(const HostTensor& x) {
  auto m = std::make_shared<HostHeldIpcMemory>(kOffset + x.bytes());
  m->write(kOffset, x.data.data(), x.bytes());
  return m;
}

TEST(RtDeviceFeatures, ReadToTheHostOnceOnlyWhenAStageNeedsThem) {
  const HostTensor x = make_tensor(300, 16, kernels::generate_features(300, 16, 5));
  auto mem = holding(x);
  auto g = Graph::from_edges(random_graph(300, 2000, 9), true);
  const Request r = Request::gnn(g, DeviceFeatures{mem, kOffset, 300, 16});
  ASSERT_NE(r.device_input(), nullptr);
  EXPECT_EQ(r.rows(), 300);
  EXPECT_EQ(r.cols(), 16);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 3});
  validate_request(m, r);
  EXPECT_EQ(mem->reads, 0) << "the shape is known without reading the features";
  EXPECT_EQ(r.input().data, x.data);
  EXPECT_EQ(r.input().data, x.data);
  EXPECT_EQ(mem->reads, 1) << "read once, then kept";
  const Request wrong = Request::gnn(g, DeviceFeatures{mem, kOffset, 300, 15});
  EXPECT_THROW(validate_request(m, wrong), InputError);
  EXPECT_THROW(Request::gnn(g, DeviceFeatures{nullptr, 0, 300, 16}), InputError);
}

TEST(RtDeviceFeatures, EngineAnswersAsForTheSameFeaturesOnTheHost) {
  Served s(2, 1, 400, 4);
  auto& [sys, m, g, x, host, e] = s;
  std::vector<std::shared_ptr<HostHeldIpcMemory>> mems;
  std::vector<std::future<HostTensor>> answers;
  for (int i = 0; i < 6; ++i) {
    mems.push_back(holding(x));
    answers.push_back(e.submit(Request::gnn(g, DeviceFeatures{mems.back(), kOffset, 400, 16})));
  }
  const HostTensor want = reference_forward(m, host);
  for (int i = 0; i < 6; ++i) {
    EXPECT_LE(relative_error(answers[static_cast<std::size_t>(i)].get(), want), 1e-6) << i;
    EXPECT_EQ(mems[static_cast<std::size_t>(i)]->reads, 1)
        << "no device here holds them: one read to the host";
  }
  e.drain();
}

// Features read where a client mapped them: the engine copies from there (no copy of its own),
// answers as for a host tensor, and refuses the request when the memory did not stay whole.
TEST(RtDeviceFeatures, MappedFeaturesAreReadWhereTheyLieAndRefusedWhenPulledAway) {
  Served s(1, 1, 300, 6);
  auto& [sys, m, g, x, host, e] = s;
  auto mapping = std::make_shared<std::vector<float>>(x.data);
  auto whole = std::make_shared<std::atomic<bool>>(true);
  auto mapped = [&] {
    return MappedFeatures{mapping, mapping->data(), 300, 16, [whole] { return whole->load(); }};
  };
  const Request r = Request::gnn(g, mapped());
  ASSERT_NE(r.mapped_input(), nullptr);
  EXPECT_EQ(r.device_input(), nullptr);
  validate_request(m, r);
  EXPECT_LE(relative_error(e.submit(r).get(), reference_forward(m, host)), 1e-6);
  EXPECT_EQ(r.input().data, x.data);  // a copy of its own only when asked for
  whole->store(false);                // the client shrank the object under the read
  EXPECT_THROW(e.submit(Request::gnn(g, mapped())).get(), InputError);
  const Request pulled = Request::gnn(g, mapped());
  EXPECT_THROW(pulled.input(), InputError);
  EXPECT_THROW(pulled.input(), InputError) << "a copy that threw is tried again, not kept";
  e.drain();
}

TEST(RtDeviceFeatures, RequestBuilderChecksThemWhereTheyLie) {
  using daemon::InferRequest;
  using daemon::SharedMemoryRef;
  using daemon::Tensor;
  const Model m = Model::gcn({.layers = 2, .in_features = 4, .hidden = 4, .seed = 1});
  daemon::GraphRegistry graphs;
  const std::string id = graphs.add(random_graph(50, 200, 2));
  HostTensor x = make_tensor(50, 4, kernels::generate_features(50, 4, 7));
  auto mem = holding(x);
  auto request = [&] {
    InferRequest in;
    Tensor t;
    t.name = "x";
    t.datatype = "FP32";
    t.shape = {50, 4};
    t.shared_memory = SharedMemoryRef{"x_cuda", kOffset, x.bytes()};
    t.device = mem;
    in.inputs.push_back(std::move(t));
    in.parameters["graph_id"] = id;
    return in;
  };
  const Request r = daemon::build_request(m, request(), graphs);
  ASSERT_NE(r.device_input(), nullptr);
  EXPECT_EQ(r.device_input()->offset, kOffset);
  EXPECT_EQ(mem->checks, 1);
  EXPECT_EQ(mem->reads, 0) << "finite features are never read to the host to be built";
  EXPECT_EQ(
      relative_error(reference_forward(m, r), reference_forward(m, Request::gnn(r.graph(), x))),
      0.0);

  // A NaN at row 7, column 2: refused, naming it (the one read is for the message).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  mem->write(kOffset + (7 * 4 + 2) * sizeof(float), &nan, sizeof nan);
  try {
    daemon::build_request(m, request(), graphs);
    ADD_FAILURE() << "a NaN in device features was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'[7][2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
  // Host-only uses (graph registration with features) read them, with the same check.
  InferRequest in = request();
  EXPECT_THROW(daemon::features(in.inputs[0], 4, "in_features"), InputError);
  // A wrong width is refused before anything is read or checked.
  in.inputs[0].shape = {25, 8};
  const int checks = mem->checks;
  EXPECT_THROW(daemon::features_on_device(in.inputs[0], 4, "in_features"), InputError);
  EXPECT_EQ(mem->checks, checks);
}

// Tensors viewing a transport's buffer (an HTTP body) are read in place once the request holds that
// buffer, and keep it alive; a view of other memory is not held.
TEST(RtDeviceFeatures, ViewsOfAHeldBufferAreReadInPlace) {
  auto body = std::make_shared<std::vector<float>>(kernels::generate_features(25, 4, 3));
  const std::vector<float> want = *body;
  const std::string_view bytes(reinterpret_cast<const char*>(body->data()),
                               body->size() * sizeof(float));
  const std::vector<float> elsewhere(100, 1.0f);
  daemon::InferRequest in;
  in.inputs.push_back({"x", "FP32", {25, 4}, {}, bytes});
  in.inputs.push_back({"other",
                       "FP32",
                       {25, 4},
                       {},
                       std::string_view(reinterpret_cast<const char*>(elsewhere.data()), 400)});
  EXPECT_FALSE(daemon::features_in_place(in.inputs[0], 4, "in_features", in))
      << "held by nothing: copied";
  daemon::hold_views(in, bytes, body);
  ASSERT_EQ(in.held.size(), 1u);
  EXPECT_EQ(in.held[0].first, "inputs['x']");
  const std::optional<MappedFeatures> x =
      daemon::features_in_place(in.inputs[0], 4, "in_features", in);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->data, body->data());
  EXPECT_TRUE(x->intact());
  in = {};
  body.reset();  // the transport lets go: the request's features still hold the bytes
  EXPECT_EQ(std::vector<float>(x->data, x->data + 100), want);
}

// Runs `r` once through a pipeline of `spec`: its completion and the first stage's transfers.
std::pair<Completion, TransferCounters> run_once(const Model& m, const PipelineSpec& spec,
                                                 Request r) {
  Pipeline p(m, spec);
  Completion got;
  p.submit({.seq = 0,
            .request = std::make_shared<Request>(std::move(r)),
            .not_before_s = 0,
            .done = [&](Completion&& c) { got = std::move(c); }});
  p.close();
  p.join();
  return {std::move(got), p.stats().at(0).transfers};
}

// A 2-layer GCN on 300 nodes with its reference answer, and a CPU and an emulated GPU to run it.
struct SmallGcnOnTwoDevices : ::testing::Test {
  hw::System sys = testing::emu_system(1, 0);
  hw::Device* cpu = &sys.device("cpu0");
  hw::Device* gpu = sys.devices_of(hw::DeviceKind::gpu).at(0);
  const Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 5});
  const std::shared_ptr<const Graph> g = Graph::from_edges(random_graph(300, 2400, 5), true);
  const HostTensor x = make_tensor(300, 16, kernels::generate_features(300, 16, 12));
  const HostTensor want = reference_forward(m, Request::gnn(g, x));
  const int last = m.num_kernels() - 1;
};

// A CPU stage's kernels read mapped features where they lie (no copy into a buffer of its own), the
// memory is asked whether it stayed whole only once the pipeline has read it, and a stage on any
// other device still gets a copy.
TEST_F(SmallGcnOnTwoDevices, CpuStagesReadMappedFeaturesInPlace) {
  auto mapping = std::make_shared<std::vector<float>>(x.data);
  auto asked = std::make_shared<std::atomic<int>>(0);
  auto whole = std::make_shared<std::atomic<bool>>(true);
  auto mapped = [&] {
    return Request::gnn(g, MappedFeatures{mapping, mapping->data(), 300, 16, [asked, whole] {
                                            ++*asked;
                                            return whole->load();
                                          }});
  };

  auto [on_cpu, cpu_moves] = run_once(m, {{{0, last, {cpu}, 0}}, ""}, mapped());
  ASSERT_FALSE(on_cpu.error);
  EXPECT_LE(relative_error(on_cpu.output, want), 1e-5);
  EXPECT_EQ(cpu_moves.moves, 1) << "used in place";
  EXPECT_EQ(cpu_moves.staged_copies, 1) << "only the answer's download";
  EXPECT_EQ(asked->load(), 1) << "asked once, after the last stage";
  EXPECT_EQ(*mapping, x.data) << "the client's memory is never written";

  // The CPU first, then a GPU: the borrowed rows are copied on from the CPU's buffer.
  auto [split, split_moves] = run_once(m, {{{0, 1, {cpu}, 0}, {2, last, {gpu}, 0}}, ""}, mapped());
  ASSERT_FALSE(split.error);
  EXPECT_LE(relative_error(split.output, want), 1e-5);
  EXPECT_EQ(split_moves.moves, 1);
  auto [on_gpu, gpu_moves] = run_once(m, {{{0, last, {gpu}, 0}}, ""}, mapped());
  ASSERT_FALSE(on_gpu.error);
  EXPECT_LE(relative_error(on_gpu.output, want), 1e-5);
  EXPECT_EQ(gpu_moves.moves, 0) << "an emulated GPU models its copy";

  // The object shrank while the kernels read it (read as zeros): the answer is refused.
  whole->store(false);
  auto [shrunk, shrunk_moves] = run_once(m, {{{0, last, {cpu}, 0}}, ""}, mapped());
  ASSERT_TRUE(shrunk.error);
  EXPECT_THROW(std::rethrow_exception(shrunk.error), InputError);
  EXPECT_TRUE(shrunk.output.data.empty());
}

// An answer asked for in client memory (an output region) is written there by the last stage's
// one download: the engine's answer is then shape-only and the memory holds what the answer would
// have been, on a CPU stage, an emulated GPU and a split pipeline alike. Memory too small, or an
// answer of some rows only, takes the usual path; memory that shrank while written is refused.
TEST_F(SmallGcnOnTwoDevices, AnswerIsWrittenIntoTheClientsMemory) {
  ASSERT_EQ(want.cols, m.output_cols());
  auto whole = std::make_shared<std::atomic<bool>>(true);
  auto memory = [&](std::vector<float>& room) {
    auto a = std::make_shared<AnswerMemory>();
    a->data = room.data();
    a->bytes = room.size() * sizeof(float);
    a->intact = [whole] { return whole->load(); };
    return a;
  };
  const std::vector<PipelineSpec> specs = {{{{0, last, {cpu}, 0}}, "1C"},
                                           {{{0, last, {gpu}, 0}}, "1G"},
                                           {{{0, 1, {cpu}, 0}, {2, last, {gpu}, 0}}, "1C1G"}};
  for (const PipelineSpec& spec : specs) {
    SCOPED_TRACE(spec.label);
    std::vector<float> room(want.data.size(), -1.0f);
    Request r = Request::gnn(g, x);
    const std::shared_ptr<AnswerMemory> a = memory(room);
    r.set_answer_memory(a);
    auto [got, moves] = run_once(m, spec, std::move(r));
    ASSERT_FALSE(got.error);
    EXPECT_TRUE(a->written->load());
    EXPECT_TRUE(got.output.size_only)
        << "the answer is in the client's memory, not a tensor of ours";
    EXPECT_EQ(got.output.rows, want.rows);
    EXPECT_EQ(got.output.cols, want.cols);
    EXPECT_TRUE(got.output.data.empty());
    EXPECT_LE(relative_error(make_tensor(want.rows, want.cols, room), want), 1e-5);
  }

  // Room for less than the answer: our own tensor, the memory untouched.
  std::vector<float> small(want.data.size() - 1, -1.0f);
  Request r = Request::gnn(g, x);
  auto a = memory(small);
  r.set_answer_memory(a);
  auto [own, own_moves] = run_once(m, specs[0], std::move(r));
  ASSERT_FALSE(own.error);
  EXPECT_FALSE(a->written->load());
  EXPECT_LE(relative_error(own.output, want), 1e-5);
  EXPECT_EQ(small, std::vector<float>(small.size(), -1.0f));

  // Some rows asked for (node_ids): the engine answers those rows itself.
  std::vector<float> room(want.data.size(), -1.0f);
  Request rows = Request::gnn(g, x);
  a = memory(room);
  rows.set_answer_memory(a);
  rows.set_rows_wanted({7, 3});
  EXPECT_EQ(rows.answer_memory(), nullptr);
  auto [picked, picked_moves] = run_once(m, specs[0], std::move(rows));
  ASSERT_FALSE(picked.error);
  EXPECT_FALSE(a->written->load());

  // The memory shrank while the answer was written: refused, naming the outputs.
  whole->store(false);
  Request shrunk = Request::gnn(g, x);
  a = memory(room);
  shrunk.set_answer_memory(a);
  auto [refused, refused_moves] = run_once(m, specs[0], std::move(shrunk));
  ASSERT_TRUE(refused.error);
  EXPECT_THROW(std::rethrow_exception(refused.error), InputError);
}

// An answer asked for in GPU memory (a CUDA output region): a stage on that very GPU would copy its
// rows there device to device (test_gpu_device.cpp, on a GPU); here no device claims the memory,
// so each shard's rows go through the host once and are written at the output's offset. The
// engine's answer is shape-only and the memory holds the reference answer, before it untouched.
TEST_F(SmallGcnOnTwoDevices, AnswerInGpuMemoryIsWrittenThroughTheHostWhenNoStageHoldsIt) {
  const std::size_t bytes = want.data.size() * sizeof(float);
  const std::vector<PipelineSpec> specs = {{{{0, last, {cpu}, 0}}, "1C"},
                                           {{{0, last, {gpu}, 0}}, "1G"},
                                           {{{0, 1, {cpu}, 0}, {2, last, {gpu}, 0}}, "1C1G"}};
  for (const PipelineSpec& spec : specs) {
    SCOPED_TRACE(spec.label);
    auto region = std::make_shared<HostHeldIpcMemory>(kOffset + bytes + 64);
    const std::vector<float> guard(16, -7.0f);
    region->write(0, guard.data(), 64);
    Request r = Request::gnn(g, x);
    auto a = std::make_shared<AnswerMemory>();
    a->device = region;
    a->device_offset = kOffset;
    a->bytes = bytes;
    r.set_answer_memory(a);
    auto [got, moves] = run_once(m, spec, std::move(r));
    ASSERT_FALSE(got.error);
    EXPECT_TRUE(a->written->load());
    EXPECT_TRUE(got.output.size_only) << "the answer is in the region, not a tensor of ours";
    EXPECT_EQ(got.output.rows, want.rows);
    std::vector<float> in_region(want.data.size()), before(16);
    region->read(kOffset, in_region.data(), bytes);
    region->read(0, before.data(), 64);
    EXPECT_LE(relative_error(make_tensor(want.rows, want.cols, in_region), want), 1e-5);
    EXPECT_EQ(before, guard) << "nothing written before the output's offset";
  }
  // Room for less than the answer: our own tensor, the region untouched.
  auto region = std::make_shared<HostHeldIpcMemory>(bytes);
  Request r = Request::gnn(g, x);
  auto a = std::make_shared<AnswerMemory>();
  a->device = region;
  a->device_offset = 4;
  a->bytes = bytes - 4;
  r.set_answer_memory(a);
  auto [own, own_moves] = run_once(m, specs[0], std::move(r));
  ASSERT_FALSE(own.error);
  EXPECT_FALSE(a->written->load());
  EXPECT_LE(relative_error(own.output, want), 1e-5);
}

}  // namespace
}  // namespace dype::rt
