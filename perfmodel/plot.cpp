#include "perfmodel/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "common/error.h"

namespace dype::perf {

nlohmann::json predicted_vs_measured_data(const std::string& title, const std::string& subtitle,
                                          const std::vector<PlotPanel>& panels) {
  nlohmann::json out{{"title", title}, {"subtitle", subtitle}, {"panels", nlohmann::json::array()}};
  for (const PlotPanel& panel : panels) {
    nlohmann::json points = nlohmann::json::array();
    for (const PlotPoint& p : panel.points)
      points.push_back(
          {{"measured_s", p.measured_s}, {"predicted_s", p.predicted_s}, {"holdout", p.holdout}});
    out["panels"].push_back({{"title", panel.title}, {"points", std::move(points)}});
  }
  return out;
}

void write_plot_data(const nlohmann::json& data, const std::filesystem::path& path) {
  std::ofstream f(path);
  if (!(f << data.dump(1) << '\n')) throw Error("cannot write " + path.string());
}

void run_plot_script(const std::filesystem::path& script, const std::vector<std::string>& args) {
  if (!std::filesystem::is_regular_file(script))
    throw Error("no plotting script at " + script.string() +
                " (it ships in the source tree's scripts/)");
  // Debian's python3-matplotlib is installed for /usr/bin/python3, which PATH may not name first.
  const bool debian = ::access("/usr/bin/python3", X_OK) == 0;
  std::vector<std::string> argv_s = {debian ? "/usr/bin/python3" : "python3", script.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  // posix_spawnp, not fork: the callers may hold threads (and their locks) that a fork would copy.
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    throw Error("cannot run " + argv_s[0] +
                " to draw the plot (install python3 and python3-matplotlib: scripts/setup.sh)");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error("lost the python3 process drawing the plot");
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (rc == 0) return;
  if (rc == 3)
    throw Error(argv_s[0] + " has no matplotlib (install python3-matplotlib: scripts/setup.sh)");
  throw Error(script.filename().string() + " failed (exit status " + std::to_string(rc) + ")");
}

}  // namespace dype::perf
