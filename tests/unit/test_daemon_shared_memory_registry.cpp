// The shared-memory registry and its guarded mappings without a server: a client that truncates
// the object behind a mapping makes the next access read zeros and mark the mapping, never SIGBUS
// the daemon (a fault outside any guarded mapping still kills, as before); a region unregistered
// while a request holds it stays mapped for that request; owners and sizes are checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <gtest/gtest.h>

#include "hw/pinned_host_memory.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/daemon/shm/guarded_mapping.h"
#include "runtime/daemon/shm/shared_memory_registry.h"
#include "runtime/model.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {

struct Object {
  std::string key;
  int fd;
  Object(const std::string& name, std::size_t bytes) : key("/" + name + "-" + std::to_string(getpid())) {
    fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  }
  ~Object() {
    close(fd);
    shm_unlink(key.c_str());
  }
};

Tensor x_in(const std::string& region, std::uint64_t bytes) {
  Tensor t;
  t.name = "x";
  t.datatype = "FP32";
  t.shape = {static_cast<std::int64_t>(bytes / 4)};
  t.shared_memory = SharedMemoryRef{region, 0, bytes};
  return t;
}

}  // namespace

TEST(GuardedMapping, TruncatedObjectReadsZerosAndIsMarkedInsteadOfKilling) {
  const long page = sysconf(_SC_PAGESIZE);
  Object o("dype-guard", static_cast<std::size_t>(4 * page));
  GuardedMapping m(o.fd, 0, static_cast<std::size_t>(4 * page), true, "test");
  std::memset(m.data(), 7, m.size());
  EXPECT_TRUE(m.intact());
  ASSERT_EQ(ftruncate(o.fd, page), 0);  // the client shrinks it under the mapping
  volatile char past = m.data()[2 * page];  // would be SIGBUS unguarded
  EXPECT_EQ(past, 0);
  EXPECT_FALSE(m.intact());
  std::memset(m.data(), 1, m.size());  // writes after the fault land in private zero pages
}

TEST(GuardedMappingDeathTest, AFaultOutsideGuardedMappingsKeepsItsDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Anonymous memory files: a dying child leaves nothing behind in /dev/shm.
  const long page = sysconf(_SC_PAGESIZE);
  const int guarded = memfd_create("dype-guard", 0);
  ASSERT_EQ(ftruncate(guarded, page), 0);
  GuardedMapping g(guarded, 0, static_cast<std::size_t>(page), true, "test");  // installs the handler
  EXPECT_DEATH(
      {
        const int fd = memfd_create("dype-unguarded", 0);
        ASSERT_EQ(ftruncate(fd, 2 * page), 0);
        char* p = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0));
        ASSERT_EQ(ftruncate(fd, 0), 0);
        volatile char c = p[page];
        (void)c;
      },
      "");
  close(guarded);
}

TEST(SharedMemoryRegistry, UnregisteredWhileARequestHoldsItStaysMappedForThatRequest) {
  Object in("dype-reg-in", 64), out("dype-reg-out", 64);
  SharedMemoryRegistry shm(true);
  shm.register_system("in", in.key, 0, 64, "key a");
  shm.register_system("out", out.key, 0, 64, "key a");
  char* mapped = static_cast<char*>(mmap(nullptr, 64, PROT_READ | PROT_WRITE, MAP_SHARED, in.fd, 0));
  for (int i = 0; i < 16; ++i) reinterpret_cast<float*>(mapped)[i] = static_cast<float>(i);
  InferRequest r;
  r.inputs.push_back(x_in("in", 64));
  r.outputs.push_back({"y", false, SharedMemoryRef{"out", 0, 64}});
  bind_shared_memory(r, &shm, "key a");
  shm.unregister(SharedMemoryRegion::Kind::system, std::nullopt, "key a");  // both, while r holds them
  EXPECT_TRUE(shm.status(SharedMemoryRegion::Kind::system, std::nullopt, "key a").empty());
  std::vector<float> scratch;
  const std::span<const float> x = r.inputs[0].f32_span(scratch);
  EXPECT_EQ(x[15], 15.0f);
  EXPECT_NO_THROW(check_inputs_read(r));
  std::vector<Tensor> outputs{Tensor::from_f32("y", {16}, std::vector<float>(x.begin(), x.end()))};
  deliver_outputs(outputs, r.outputs);
  EXPECT_TRUE(outputs[0].bytes().empty());
  ASSERT_TRUE(outputs[0].shared_memory);
  float written[16];
  ASSERT_EQ(pread(out.fd, written, sizeof written, 0), static_cast<ssize_t>(sizeof written));
  EXPECT_EQ(written[15], 15.0f);
  munmap(mapped, 64);
}

// An output region offers its memory for the engine to write the answer into (Request::
// set_answer_memory): the answer delivered after that copies nothing and reports its own size. A
// region too small, or whose object shrank, offers none, and a shrink after the offer is noticed.
TEST(SharedMemoryRegistry, OutputRegionTakesTheAnswerInPlace) {
  Object out("dype-reg-answer", 4096 + 64);
  SharedMemoryRegistry shm(true);
  shm.register_system("out", out.key, 0, 4096 + 64, "key a");
  InferRequest r;
  r.outputs.push_back({"y", false, SharedMemoryRef{"out", 4096, 64}});
  bind_shared_memory(r, &shm, "key a");
  const OutputSink& sink = *r.outputs[0].sink;
  EXPECT_EQ(sink.memory_for(65), nullptr) << "more than the output's byte size";
  const std::shared_ptr<const rt::AnswerMemory> m = sink.memory_for(64);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->bytes, 64u);
  EXPECT_TRUE(m->intact());
  for (int i = 0; i < 16; ++i) m->data[i] = static_cast<float>(i);  // the engine's download
  m->written->store(true);
  EXPECT_TRUE(sink.written_in_place());
  rt::HostTensor y = rt::HostTensor::shape_only(4, 4);  // what the engine answers then
  std::vector<Tensor> outputs = output_tensors(y, {"y"}, /*view=*/true);
  deliver_outputs(outputs, r.outputs);
  ASSERT_TRUE(outputs[0].shared_memory);
  EXPECT_EQ(outputs[0].shared_memory->byte_size, 64u);
  EXPECT_EQ(outputs[0].shared_memory->offset, 4096u);
  float written[16];
  ASSERT_EQ(pread(out.fd, written, sizeof written, 4096), static_cast<ssize_t>(sizeof written));
  EXPECT_EQ(written[15], 15.0f);

  // The client shrinks the object: no memory is offered, and memory offered before says so.
  InferRequest again;
  again.outputs.push_back({"y", false, SharedMemoryRef{"out", 4096, 64}});
  bind_shared_memory(again, &shm, "key a");
  const std::shared_ptr<const rt::AnswerMemory> before = again.outputs[0].sink->memory_for(64);
  ASSERT_NE(before, nullptr);
  ASSERT_EQ(ftruncate(out.fd, 4096), 0);
  EXPECT_FALSE(before->intact());
  EXPECT_EQ(again.outputs[0].sink->memory_for(64), nullptr);
}

TEST(SharedMemoryRegistry, OwnersSizesAndTheSwitchAreChecked) {
  Object in("dype-reg-own", 64);
  SharedMemoryRegistry off(false);
  EXPECT_THROW(off.register_system("in", in.key, 0, 64, "key a"), Forbidden);
  SharedMemoryRegistry shm(true);
  shm.register_system("in", in.key, 0, 64, "key a");
  InferRequest other;
  other.inputs.push_back(x_in("in", 64));
  EXPECT_THROW(bind_shared_memory(other, &shm, "key b"), Forbidden);
  EXPECT_TRUE(shm.status(SharedMemoryRegion::Kind::system, std::nullopt, "key b").empty());
  EXPECT_THROW(shm.unregister(SharedMemoryRegion::Kind::system, "in", "key b"), Forbidden);
  InferRequest past;
  past.inputs.push_back(x_in("in", 64));
  past.inputs[0].shared_memory->offset = 4;
  EXPECT_THROW(bind_shared_memory(past, &shm, "key a"), InputError);
  InferRequest none;
  none.inputs.push_back(x_in("in", 64));
  EXPECT_THROW(bind_shared_memory(none, nullptr, "key a"), Forbidden);
  // A truncated object is refused at use, naming the region.
  ASSERT_EQ(ftruncate(in.fd, 8), 0);
  InferRequest cut;
  cut.inputs.push_back(x_in("in", 64));
  try {
    bind_shared_memory(cut, &shm, "key a");
    FAIL() << "a truncated region was bound";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// A registered region is pinned for the GPUs once, at registration (here by a pinner that records
// what cudaHostRegister would be given), its bytes are the ones a request's x views, and it stays
// pinned while a request holds it after unregistering.
TEST(SharedMemoryRegistry, RegionsArePinnedOnceAndUnpinnedWithTheirLastHolder) {
  static std::vector<std::pair<void*, std::size_t>> pinned;
  static std::vector<void*> unpinned;
  hw::add_host_pinner({"cuda",
                       [](void* p, std::size_t n, std::string&) {
                         pinned.emplace_back(p, n);
                         return true;
                       },
                       [](void* p) { unpinned.push_back(p); }});
  Object in("dype-reg-pin", 64);
  SharedMemoryRegistry shm(true);
  shm.register_system("in", in.key, 0, 64, "key a");
  ASSERT_EQ(pinned.size(), 1u);
  EXPECT_EQ(pinned[0].second, 64u);
  InferRequest r;
  r.inputs.push_back(x_in("in", 64));
  bind_shared_memory(r, &shm, "key a");
  EXPECT_EQ(static_cast<const void*>(r.inputs[0].bytes().data()), pinned[0].first);
  EXPECT_TRUE(hw::host_memory_pinned(r.inputs[0].bytes().data(), 64))
      << "a GPU upload of x is one DMA";
  shm.unregister(SharedMemoryRegion::Kind::system, "in", "key a");
  EXPECT_TRUE(unpinned.empty()) << "the request still reads it";
  r = InferRequest{};
  ASSERT_EQ(unpinned.size(), 1u);
  EXPECT_EQ(unpinned[0], pinned[0].first);
  EXPECT_EQ(pinned.size(), 1u) << "pinned once";
}
