#pragma once
// dype-serve as an operator runs it: a separate process started with a port file, its output in a
// log (tests/e2e/test_dype_serve_cli.cpp, test_dype_serve_hosts.cpp).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace dype::test {

namespace fs = std::filesystem;
inline const std::string kServeExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-serve";

inline std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Starts dype-serve with `args` and --port-file `ports` (removed first), both output streams appended
// to `log`; with `wait`, returns once the port file is there (at most 60 s: callers check it).
inline pid_t spawn_serve(const std::vector<std::string>& args, const fs::path& log, const fs::path& ports, bool wait = true) {
  fs::remove(ports);
  std::vector<std::string> a = {kServeExe};
  a.insert(a.end(), args.begin(), args.end());
  a.insert(a.end(), {"--port-file", ports.string()});
  std::vector<char*> argv;
  for (auto& x : a) argv.push_back(x.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(log.c_str(), "a", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(126);
    execv(kServeExe.c_str(), argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (wait && !fs::exists(ports) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pid;
}

// Child daemons killed (SIGKILL) and reaped when the test ends, however it ends (a failed ASSERT
// included), never left running; stop() ends one with SIGTERM and returns its wait status.
struct Children {
  std::vector<pid_t> pids;
  ~Children() {
    for (pid_t p : pids) {
      if (p > 0 && ::kill(p, SIGKILL) == 0) ::waitpid(p, nullptr, 0);
    }
  }
  int stop(pid_t p) {
    ::kill(p, SIGTERM);
    int status = -1;
    ::waitpid(p, &status, 0);
    std::erase(pids, p);
    return status;
  }
};

}  // namespace dype::test
