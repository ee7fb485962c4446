#pragma once
// Registered graphs that take updates, kept in the state directory (dype-serve --state-dir) so
// that a restart finds each at its last version: per graph a snapshot (owner, edges, features,
// version), written whole and atomically at registration and every kCompactAfter updates, and a
// log of the updates applied since, appended as each applies. Loading replays the log on the
// snapshot; a record cut short by a crash mid-write is dropped (that update had not been answered).
//
//   <dir>/graphs/<id>/snapshot     "DYPEGRF1", owner, address, version, nodes, F, edges, x
//   <dir>/graphs/<id>/updates.log  records "DYPEUPD1", version, the update's arrays
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/incremental/dynamic_graph.h"

namespace dype::rt::daemon {

class GraphStore {
 public:
  static constexpr int kCompactAfter = 4096;  // updates logged before the snapshot is rewritten

  // Creates <dir>/graphs when missing, readable by this user only (dype::Error naming it when it
  // cannot).
  explicit GraphStore(std::filesystem::path dir);

  struct Loaded {
    std::string id, owner, address;
    std::unique_ptr<DynamicGraph> graph;
  };
  // Every stored graph at its last version; a graph that cannot be read is skipped, its reason in
  // `problems` (its files are left for the operator).
  std::vector<Loaded> load(std::vector<std::string>& problems) const;

  // A fresh snapshot of the graph, its log emptied. dype::Error when it cannot be written.
  // create false (a compaction): nothing when the graph's folder is gone (deleted meanwhile).
  void save(const std::string& id, const std::string& owner, const std::string& address,
            const DynamicGraph& g, bool create = true);
  // Appends an update that takes the graph to `version`, before it applies (so an update that
  // could not be kept is not applied); returns the log's size before it, for take_back. dype::Error
  // when it cannot be written (a record written in part is cut off again).
  std::uint64_t append(const std::string& id, const GraphUpdate& u, std::uint64_t version);
  // Cuts the log back to `size` (append's answer): the update it logged did not apply after all.
  void take_back(const std::string& id, std::uint64_t size);
  // Whether the snapshot is due to be rewritten (save) at this version.
  static bool compact_due(std::uint64_t version) { return version % kCompactAfter == 0; }
  void remove(const std::string& id);

 private:
  std::filesystem::path dir_;
};

}  // namespace dype::rt::daemon
