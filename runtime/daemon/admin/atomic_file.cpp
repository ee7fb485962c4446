#include "runtime/daemon/admin/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace dype::rt::daemon {
namespace {

void sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(path + ": fsync failed: " + std::strerror(errno));
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  // A name of its own per write: two writers of one file never share a temporary.
  static std::atomic<unsigned> serial{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << contents;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(tmp + ": write failed");
    }
  }
  sync_path(tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(path + ": rename failed: " + why);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  sync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace dype::rt::daemon
