#include "runtime/daemon/graph_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "runtime/daemon/admin/atomic_file.h"

namespace dype::rt::daemon {

namespace fs = std::filesystem;

namespace {

constexpr char kSnapshotMagic[8] = {'D', 'Y', 'P', 'E', 'G', 'R', 'F', '1'};
constexpr char kUpdateMagic[8] = {'D', 'Y', 'P', 'E', 'U', 'P', 'D', '1'};

// Little-endian values and length-prefixed arrays into a string (the machines are little-endian).
struct Writer {
  std::string out;
  void bytes(const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
  void u64(std::uint64_t v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    out += s;
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    u64(v.size());
    bytes(v.data(), v.size() * sizeof(T));
  }
};

// Reads what Writer wrote; false once the data runs out (a record cut short).
struct Reader {
  const std::string& in;
  std::size_t at = 0;
  bool bytes(void* p, std::size_t n) {
    if (in.size() - at < n) return false;
    if (n > 0) std::memcpy(p, in.data() + at, n);  // an empty vector's data() may be null
    at += n;
    return true;
  }
  bool u64(std::uint64_t& v) { return bytes(&v, sizeof v); }
  bool str(std::string& s) {
    std::uint64_t n;
    if (!u64(n) || in.size() - at < n) return false;
    s.assign(in, at, n);
    at += n;
    return true;
  }
  template <typename T>
  bool vec(std::vector<T>& v) {
    std::uint64_t n;
    if (!u64(n) || n > (in.size() - at) / sizeof(T)) return false;
    v.resize(n);
    return bytes(v.data(), n * sizeof(T));
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

GraphStore::GraphStore(fs::path dir) : dir_(std::move(dir) / "graphs") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(dir_.string() + ": cannot create: " + ec.message());
  // The snapshots hold each graph's owner key (what updates and deletes it) and its features: this
  // user's only, as the update logs are.
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) throw Error(dir_.string() + ": cannot make it private: " + ec.message());
}

void GraphStore::save(const std::string& id, const std::string& owner, const std::string& address,
                      const DynamicGraph& g, bool create) {
  const fs::path d = dir_ / id;
  std::error_code ec;
  if (!create && !fs::is_directory(d, ec)) return;
  fs::create_directories(d, ec);
  if (ec) throw Error(d.string() + ": cannot create: " + ec.message());
  Writer w;
  w.bytes(kSnapshotMagic, sizeof kSnapshotMagic);
  w.str(owner);
  w.str(address);
  w.u64(g.version());
  const kernels::EdgeList e = g.edge_list();
  w.u64(static_cast<std::uint64_t>(e.num_nodes));
  w.u64(static_cast<std::uint64_t>(g.feature_len()));
  w.vec(e.src);
  w.vec(e.dst);
  w.vec(g.features().data);
  write_file_atomically((d / "snapshot").string(), w.out);
  fs::remove(d / "updates.log", ec);  // its updates are in the snapshot now
}

std::uint64_t GraphStore::append(const std::string& id, const GraphUpdate& u,
                                 std::uint64_t version) {
  Writer w;
  w.bytes(kUpdateMagic, sizeof kUpdateMagic);
  w.u64(version);
  w.vec(u.add_src);
  w.vec(u.add_dst);
  w.vec(u.remove_src);
  w.vec(u.remove_dst);
  w.u64(static_cast<std::uint64_t>(u.add_nodes));
  w.vec(u.add_x);
  w.vec(u.set_rows);
  w.vec(u.set_x);
  // One write() per record: a crash leaves at most the last record cut short. Not synced: an
  // update survives the process, and the host's crash only where the page cache did.
  const std::string path = (dir_ / id / "updates.log").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  const off_t before = ::lseek(fd, 0, SEEK_END);
  const ssize_t n = ::write(fd, w.out.data(), w.out.size());
  const int write_errno = errno;
  if (n != static_cast<ssize_t>(w.out.size())) {
    // A record written in part (the disk full) would hide every later record from a replay.
    if (before >= 0 && n > 0 && ::ftruncate(fd, before) != 0) {
      // Nothing more to do here: the loader drops a record cut short, and with it what follows.
    }
    ::close(fd);
    throw Error(path + ": write failed: " + std::strerror(n < 0 ? write_errno : ENOSPC));
  }
  ::close(fd);
  return before < 0 ? 0 : static_cast<std::uint64_t>(before);
}

void GraphStore::take_back(const std::string& id, std::uint64_t size) {
  std::error_code ec;
  fs::resize_file(dir_ / id / "updates.log", size, ec);
  if (ec) throw Error((dir_ / id / "updates.log").string() + ": cannot cut back: " + ec.message());
}

void GraphStore::remove(const std::string& id) {
  std::error_code ec;
  fs::remove_all(dir_ / id, ec);
}

std::vector<GraphStore::Loaded> GraphStore::load(std::vector<std::string>& problems) const {
  std::vector<Loaded> out;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(dir_, ec)) {
    if (!d.is_directory()) continue;
    const std::string id = d.path().filename().string();
    try {
      const std::string snap = read_all(d.path() / "snapshot");
      Reader r{snap};
      char magic[8];
      Loaded l{id, {}, {}, nullptr};
      std::uint64_t version = 0, nodes = 0, f = 0;
      kernels::EdgeList e;
      std::vector<float> x;
      if (!r.bytes(magic, 8) || std::memcmp(magic, kSnapshotMagic, 8) != 0 || !r.str(l.owner) ||
          !r.str(l.address) || !r.u64(version) || !r.u64(nodes) || !r.u64(f) || !r.vec(e.src) ||
          !r.vec(e.dst) || !r.vec(x) || e.src.size() != e.dst.size() || x.size() != nodes * f)
        throw Error("snapshot unreadable or cut short");
      e.num_nodes = static_cast<std::int64_t>(nodes);
      l.graph = std::make_unique<DynamicGraph>(
          e, f > 0 ? make_tensor(static_cast<std::int64_t>(nodes), static_cast<std::int64_t>(f),
                                 std::move(x))
                   : HostTensor{});
      l.graph->restore_version(version);
      const std::string log = read_all(d.path() / "updates.log");
      Reader u{log};
      while (u.at < log.size()) {
        GraphUpdate up;
        std::uint64_t v = 0, add_nodes = 0;
        if (!u.bytes(magic, 8) || std::memcmp(magic, kUpdateMagic, 8) != 0 || !u.u64(v) ||
            !u.vec(up.add_src) || !u.vec(up.add_dst) || !u.vec(up.remove_src) ||
            !u.vec(up.remove_dst) || !u.u64(add_nodes) || !u.vec(up.add_x) || !u.vec(up.set_rows) ||
            !u.vec(up.set_x))
          break;  // cut short by a crash mid-write: that update was never answered
        if (v <= l.graph->version()) continue;  // already in the snapshot
        up.add_nodes = static_cast<std::int64_t>(add_nodes);
        l.graph->apply(up);
        if (l.graph->version() != v)
          throw Error("update log skips from version " + std::to_string(l.graph->version() - 1) +
                      " to " + std::to_string(v));
      }
      out.push_back(std::move(l));
    } catch (const std::exception& err) {
      problems.push_back("graph " + id + " in " + d.path().string() + " not loaded: " + err.what());
    }
  }
  return out;
}

}  // namespace dype::rt::daemon
