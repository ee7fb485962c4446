// Runs one of the project's executables as an operator would, for the e2e tests of its CLI:
// stdout and stderr together, and the exit status (-1 when it did not exit normally).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dype::test {

struct CliResult {
  int status = -1;
  std::string out;  // stdout and stderr
};

inline CliResult run_cli(const std::string& exe, const std::string& args) {
  CliResult r;
  FILE* p = popen((exe + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace dype::test
