// A temporary folder of this test process's own, removed when the process exits. ctest runs every
// test case as its own process, in parallel: a shared fixed path lets one case overwrite a file that
// another case is reading.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

namespace dype::test {

namespace detail {
struct TempDirs {
  std::set<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
inline TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}
}  // namespace detail

inline std::filesystem::path process_temp_dir(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  detail::temp_dirs().dirs.insert(dir);
  return dir;
}

}  // namespace dype::test
