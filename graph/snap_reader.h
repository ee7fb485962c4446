#pragma once
// SNAP-style edge lists: one "src dst" pair per line, tab or space separated, '#' (and KONECT's
// '%') comment lines. Node ids may be any non-negative integers; by default they are remapped to
// 0..N-1 in increasing id order (so ids that are already 0..N-1 map to themselves) and the
// mapping is kept. Errors read "<file>:<line>: <problem>".
//
//   SnapOptions opt;
//   opt.undirected = true;  // add the reverse of every edge (self-loops once)
//   SnapGraph g = read_snap("web-Google.txt", opt);
//   std::int64_t original = g.original_ids[g.edges.src[0]];
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "graph/edge_list.h"

namespace dype::kernels {

struct SnapOptions {
  // Add dst -> src for every edge src -> dst with src != dst (the file lists each edge once).
  bool undirected = false;
  // Read a third column as the edge weight (finite float); otherwise a third column is an error.
  bool weighted = false;
  // Ignore any columns after the ones read (KONECT files carry timestamps there).
  bool ignore_extra_columns = false;
  // Remap ids to 0..N-1. When false ids are used as they are and num_nodes = max id + 1.
  bool remap_ids = true;
};

struct SnapGraph {
  EdgeList edges;
  // original_ids[k] is the file's id of node k (sorted ascending); empty when remap_ids is false.
  std::vector<std::int64_t> original_ids;
};

SnapGraph read_snap(const std::filesystem::path& path, const SnapOptions& options = {});
// Reads SNAP text held in memory; `name` stands for the file name in errors.
SnapGraph parse_snap(std::string_view text, const std::string& name,
                     const SnapOptions& options = {});

}  // namespace dype::kernels
