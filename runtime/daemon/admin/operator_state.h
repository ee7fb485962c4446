#pragma once
// What an operator changed while dype-serve ran (objective mode, drained devices, FPGA images),
// kept in DIR/state.json so a restart, even after SIGKILL, comes back the way it was left. Each
// change is written atomically (a temporary file synced, renamed over the old one, the folder
// synced), so the file always holds the last committed state.
//
//   OperatorStateFile f("/var/lib/dype");
//   OperatorState s = f.load();        // empty when there is no file yet
//   s.drained.insert("gpu0");
//   f.save(s);
#include <map>
#include <optional>
#include <set>
#include <string>

namespace dype::rt::daemon {

struct OperatorState {
  std::optional<std::string> mode;
  std::set<std::string> drained;                  // devices drained by the operator
  std::map<std::string, std::string> bitstreams;  // FPGA -> manifest path loaded ("" = unloaded)
};

class OperatorStateFile {
 public:
  // Creates the folder when missing; InputError naming it when it cannot be made or written.
  explicit OperatorStateFile(std::string dir);
  const std::string& path() const { return path_; }
  // The saved state; empty without a file; InputError naming the file and key when malformed.
  OperatorState load() const;
  void save(const OperatorState& state) const;

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace dype::rt::daemon
