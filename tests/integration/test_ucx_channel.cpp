// Activations between processes over UCX (runtime/remote/ucx_channel.h): streams arrive in order
// and bit-exact over TCP and over UCX's default transports, a peer process that dies is reported
// naming it within a bounded time, malformed frames are refused, and the listener binds only to
// the address it is given. Where UCX cannot start here, the tests skip and say why.
#include <arpa/inet.h>
#include <atomic>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "runtime/remote/ucx_channel.h"

using namespace dype::rt::remote;
using namespace std::chrono_literals;

namespace {

// Sets (or unsets, for nullptr) an environment variable for one test and restores it after:
// UCX reads UCX_TLS when a context is created, so the setting must precede UcxContext::create.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The context, or nullptr with the reason in `why` when UCX cannot start in this environment.
std::shared_ptr<UcxContext> try_context(std::string& why, const UcxOptions& options = {}) {
  try {
    return UcxContext::create(options);
  } catch (const ChannelError& e) {
    why = e.what();
    return nullptr;
  }
}

#define UCX_CONTEXT_OR_SKIP(var, ...)                                            \
  std::string var##_why;                                                         \
  auto var = try_context(var##_why __VA_OPT__(, ) __VA_ARGS__);                  \
  if (!var) GTEST_SKIP() << "UCX cannot start here: " << var##_why

// Every bit of activation `seq` is a function of (seq, index), so the receiver can check an
// activation bit for bit without keeping the sender's copy. Raw bits include NaN and denormal
// patterns on purpose: nothing on the way may canonicalise a float.
std::uint32_t bits_at(std::uint64_t seq, std::size_t i) {
  std::uint64_t z = (seq << 32) + i + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

Activation pattern(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows, std::uint32_t cols) {
  Activation a = Activation::uninitialised(epoch, seq, rows, cols);
  auto v = a.values();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint32_t b = bits_at(seq, i);
    std::memcpy(&v[i], &b, sizeof b);
  }
  return a;
}

::testing::AssertionResult is_pattern(const Activation& a) {
  const auto v = a.values();
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &v[i], sizeof b);
    if (b != bits_at(a.seq(), i)) {
      return ::testing::AssertionFailure() << "activation seq " << a.seq() << " differs at value " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

// 1,000 shapes from 1 x 1 to 4096 x 256, log-uniform (so small eager frames and multi-MB
// rendezvous frames both occur), with both extremes included.
std::vector<std::pair<std::uint32_t, std::uint32_t>> random_shapes(std::size_t n) {
  std::mt19937_64 rng(20);
  std::uniform_real_distribution<double> lr(0.0, std::log(4096.0)), lc(0.0, std::log(256.0));
  std::vector<std::pair<std::uint32_t, std::uint32_t>> shapes;
  shapes.emplace_back(1, 1);
  shapes.emplace_back(4096, 256);
  while (shapes.size() < n) {
    shapes.emplace_back(static_cast<std::uint32_t>(std::lround(std::exp(lr(rng)))),
                        static_cast<std::uint32_t>(std::lround(std::exp(lc(rng)))));
  }
  return shapes;
}

// Streams 1,000 activations from a connecting thread to an accepting one; checks order, ids,
// shapes and bits, and the clean close at the end.
void stream_thousand(const std::shared_ptr<UcxContext>& ctx) {
  const auto shapes = random_shapes(1000);
  UcxListener listener(ctx, {"127.0.0.1", 0});
  const std::uint16_t port = listener.port();
  std::string sender_error;
  std::thread sender([&] {
    try {
      UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        ch.send(pattern(/*epoch=*/i / 100, /*seq=*/1000 + i, shapes[i].first, shapes[i].second));
      }
      ch.close();
    } catch (const std::exception& e) {
      sender_error = e.what();
    }
  });
  UcxChannel ch = listener.accept();
  std::size_t received = 0;
  while (auto a = ch.recv()) {
    ASSERT_LT(received, shapes.size());
    EXPECT_EQ(a->seq(), 1000 + received) << "out of order";
    EXPECT_EQ(a->epoch(), received / 100);
    EXPECT_EQ(a->rows(), shapes[received].first);
    EXPECT_EQ(a->cols(), shapes[received].second);
    EXPECT_TRUE(is_pattern(*a));
    ++received;
  }
  sender.join();
  EXPECT_EQ(sender_error, "");
  EXPECT_EQ(received, shapes.size());
}

}  // namespace

TEST(UcxChannel, ThousandActivationsArriveInOrderBitExactOverTcp) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  stream_thousand(ctx);
}

TEST(UcxChannel, ThousandActivationsArriveInOrderBitExactOverDefaultTransports) {
  ScopedEnv tls("UCX_TLS", nullptr);
  UCX_CONTEXT_OR_SKIP(ctx);
  stream_thousand(ctx);
}

TEST(UcxChannel, PeerProcessThatExitsIsReportedNamingItWithinBoundedTime) {
  ScopedEnv tls("UCX_TLS", "tcp");
  // Fork before this process starts UCX, so the child starts its own from a clean state.
  int port_pipe[2], go_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  ASSERT_EQ(pipe(go_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(port_pipe[1]);
    close(go_pipe[1]);
    std::uint16_t port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port) _exit(2);
    try {
      auto ctx = UcxContext::create();
      UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
      for (std::uint64_t seq = 0; seq < 3; ++seq) ch.send(pattern(0, seq, 64, 64));
      ch.flush();
      // Gone once the parent has its three frames (flush says they left, not that they were
      // taken: an exit before that could be reported ahead of them).
      char go = 0;
      if (read(go_pipe[0], &go, 1) != 1) _exit(4);
    } catch (...) {
      _exit(3);
    }
    _exit(0);  // gone without close(): to the peer this is a crash
  }
  close(port_pipe[0]);
  close(go_pipe[0]);
  std::string why;
  auto ctx = try_context(why);
  if (!ctx) {
    close(port_pipe[1]);
    close(go_pipe[1]);
    waitpid(child, nullptr, 0);
    GTEST_SKIP() << "UCX cannot start here: " << why;
  }
  UcxListener listener(ctx, {"127.0.0.1", 0}, {.timeout = 10s});
  const std::uint16_t port = listener.port();
  ASSERT_EQ(write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  close(port_pipe[1]);
  UcxChannel ch = listener.accept();
  for (std::uint64_t seq = 0; seq < 3; ++seq) {
    auto a = ch.recv();
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->seq(), seq);
    EXPECT_TRUE(is_pattern(*a));
  }
  ASSERT_EQ(write(go_pipe[1], "x", 1), 1);
  close(go_pipe[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  const auto t0 = std::chrono::steady_clock::now();
  try {
    ch.recv();
    FAIL() << "recv() returned after the peer died";
  } catch (const ChannelError& e) {
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(e.kind(), ChannelError::Kind::peer_failed) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer " + ch.peer() + " failed"), std::string::npos) << e.what();
    EXPECT_NE(ch.peer().find("127.0.0.1:"), std::string::npos) << ch.peer();
    EXPECT_LT(waited_s, 5.0) << e.what();
    std::printf("peer exit reported after %.3f s: %s\n", waited_s, e.what());
  }
  // Using the channel again keeps failing the same way, and closing it does not hang.
  EXPECT_THROW(ch.recv(), ChannelError);
  EXPECT_THROW(ch.close(), ChannelError);
}

TEST(UcxChannel, HeaderThatDoesNotMatchThePayloadIsRefusedAndTheChannelGoesOn) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  UcxListener listener(ctx, {"127.0.0.1", 0});
  const std::uint16_t port = listener.port();
  std::string sender_error;
  std::thread sender([&] {
    try {
      UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
      // Frame 0 claims 4 x 4 floats (64 bytes) but carries 60.
      const std::vector<std::byte> short_payload(60, std::byte{1});
      ch.send_frame({.rows = 4, .cols = 4, .epoch = 1, .seq = 7, .frame = 0, .window = 8}, short_payload);
      ch.send(pattern(1, 8, 4, 4));
      ch.close();
    } catch (const std::exception& e) {
      sender_error = e.what();
    }
  });
  UcxChannel ch = listener.accept();
  try {
    ch.recv();
    FAIL() << "a malformed frame was accepted";
  } catch (const ActivationError& e) {
    EXPECT_EQ(std::string(e.what()),
              "activation from " + ch.peer() +
                  ", frame 0 (seq 7): header says 4 x 4 float32 = 16 values but the payload has 60 "
                  "bytes; refused");
  }
  auto next = ch.recv();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->seq(), 8u);
  EXPECT_TRUE(is_pattern(*next));
  EXPECT_FALSE(ch.recv().has_value());
  sender.join();
  EXPECT_EQ(sender_error, "");
}

// A channel dropped after taking some of the activations that arrived (as when a recv() throws
// part-way through a stream) gives back what it still holds without touching the ones it gave out.
TEST(UcxChannel, ChannelDroppedWithActivationsPartlyTakenReleasesCleanly) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  UcxListener listener(ctx, {"127.0.0.1", 0});
  const std::uint16_t port = listener.port();
  std::atomic<bool> receiver_done{false};
  std::string sender_error;
  std::thread sender([&] {
    try {
      UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port}, {.window = 8});
      for (std::uint64_t seq = 0; seq < 3; ++seq) ch.send(pattern(0, seq, 8, 8));
      ch.flush();
      while (!receiver_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const std::exception& e) {
      sender_error = e.what();
    }
  });
  {
    UcxChannel ch = listener.accept();
    auto first = ch.recv();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->seq(), 0u);
    // Let the other two arrive, then drop the channel with them unread.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  receiver_done = true;
  sender.join();
}

TEST(UcxChannel, RefusedLargeFrameIsNotFetchedAndTheSenderIsTold) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  UcxListener listener(ctx, {"127.0.0.1", 0});
  const std::uint16_t port = listener.port();
  std::string sender_error;
  std::thread sender([&] {
    try {
      UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
      // 1 MB claimed as 1024 x 256 floats, one float short: large enough for rendezvous.
      const std::vector<std::byte> payload(1024 * 256 * 4 - 4, std::byte{2});
      ch.send_frame({.rows = 1024, .cols = 256, .seq = 3, .frame = 0, .window = 8}, payload);
      ch.close();
    } catch (const ChannelError& e) {
      sender_error = e.what();
    }
  });
  UcxChannel ch = listener.accept();
  EXPECT_THROW(ch.recv(), ActivationError);
  sender.join();
  // The sender learns it through its own channel: the frame completed with the refusal.
  EXPECT_NE(sender_error.find("failed on frame 0"), std::string::npos) << sender_error;
}

TEST(UcxListener, BindsOnlyTheAddressItIsGiven) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  UcxListener listener(ctx, {"127.0.0.1", 0});
  const std::uint16_t port = listener.port();
  ASSERT_NE(port, 0);
  EXPECT_EQ(listener.address(), "127.0.0.1:" + std::to_string(port));
  // All of 127/8 reaches this host, but nothing listens on 127.0.0.2 at that port: a listener
  // bound to 0.0.0.0 would accept this connection.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in other{};
  other.sin_family = AF_INET;
  other.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.2", &other.sin_addr);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&other), sizeof other);
  const int err = errno;
  close(fd);
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(err, ECONNREFUSED);
}

TEST(UcxListener, BadAddressOrPortIsAClearError) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const ChannelError& e) {
      EXPECT_EQ(e.kind(), ChannelError::Kind::setup) << e.what();
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message([] { parse_host_port("127.0.0.1:70000"); }),
            "address '127.0.0.1:70000': port 70000 is out of range 0..65535 (expected HOST:PORT)");
  EXPECT_EQ(message([] { parse_host_port("127.0.0.1"); }),
            "address '127.0.0.1': no host or no port (expected HOST:PORT)");
  EXPECT_EQ(message([] { parse_host_port("host:"); }),
            "address 'host:': port '' is not a number (expected HOST:PORT)");
  const HostPort v6 = parse_host_port("[::1]:7000");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 7000);

  // An address that is not this host's (TEST-NET-1): bind fails, the message names it.
  const std::string not_ours = message([&] { UcxListener l(ctx, {"192.0.2.1", 0}); });
  EXPECT_EQ(not_ours.rfind("cannot listen on 192.0.2.1:0: ", 0), 0u) << not_ours;
  EXPECT_NE(not_ours.find("; bind: Cannot assign requested address"), std::string::npos) << not_ours;
  // Not an address at all.
  const std::string garbage = message([&] { UcxListener l(ctx, {"300.1.2.3.4", 0}); });
  EXPECT_EQ(garbage.rfind("cannot resolve '300.1.2.3.4': ", 0), 0u) << garbage;
  // A port that is taken.
  UcxListener first(ctx, {"127.0.0.1", 0});
  const std::string taken = message([&] { UcxListener l(ctx, {"127.0.0.1", first.port()}); });
  EXPECT_EQ(taken.rfind("cannot listen on 127.0.0.1:" + std::to_string(first.port()) + ": ", 0), 0u)
      << taken;
  EXPECT_NE(taken.find("; bind: Address already in use"), std::string::npos) << taken;
  std::printf("%s\n%s\n%s\n", not_ours.c_str(), garbage.c_str(), taken.c_str());
}

TEST(UcxChannel, ConnectingWhereNobodyListensFailsNamingThePeer) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  // A port that was free a moment ago.
  std::uint16_t port = 0;
  { port = UcxListener(ctx, {"127.0.0.1", 0}).port(); }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    UcxChannel::connect(ctx, {"127.0.0.1", port}, {.timeout = 5s});
    FAIL() << "connected to nobody";
  } catch (const ChannelError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);
  }
}

// UcxAcceptor: eight peers connect at once; every one is accepted (none refused while another is
// being accepted), each on its own channel, and each peer's frames reach its own channel in order.
TEST(UcxAcceptor, PeersThatConnectAtOnceAreAllAcceptedEachOnItsOwnChannel) {
  ScopedEnv tls("UCX_TLS", "tcp");
  UCX_CONTEXT_OR_SKIP(ctx);
  UcxAcceptor acceptor(ctx, {"127.0.0.1", 0}, {.window = 8, .timeout = std::chrono::milliseconds(10'000)});
  const std::uint16_t port = acceptor.port();
  constexpr int kPeers = 8;
  std::vector<std::string> errors(kPeers);
  std::vector<std::thread> peers;
  for (int p = 0; p < kPeers; ++p) {
    peers.emplace_back([&, p] {
      try {
        UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
        for (int i = 0; i < 20; ++i) ch.send(pattern(/*epoch=*/static_cast<std::uint64_t>(p), /*seq=*/i, 64, 16));
        ch.close();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(p)] = e.what();
      }
    });
  }
  std::vector<std::thread> servers;
  std::vector<int> received(kPeers, 0);
  std::atomic<int> out_of_order{0};
  for (int p = 0; p < kPeers; ++p) {
    auto ch = std::make_shared<UcxChannel>(acceptor.accept(std::chrono::milliseconds(10'000)));
    servers.emplace_back([ch, &received, &out_of_order] {
      std::uint64_t next = 0;
      while (auto a = ch->recv()) {
        if (a->seq() != next++ || !is_pattern(*a)) ++out_of_order;
        ++received[static_cast<std::size_t>(a->epoch())];
      }
    });
  }
  for (auto& t : peers) t.join();
  for (auto& t : servers) t.join();
  for (int p = 0; p < kPeers; ++p) {
    EXPECT_EQ(errors[static_cast<std::size_t>(p)], "") << "peer " << p;
    EXPECT_EQ(received[static_cast<std::size_t>(p)], 20) << "peer " << p;
  }
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_THROW(acceptor.accept(std::chrono::milliseconds(50)), ChannelError) << "nobody else knocked";
}
