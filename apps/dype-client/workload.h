#pragma once
// What `dype-client stream` sends: a sequence of phases, each a graph (GNN models) or a token
// sequence shape (transformer models) sent for a number of consecutive requests. Phases come from
// a drift schedule of generated inputs or from a directory of graph files, one phase per file.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/edge_list.h"

namespace dype::client {

struct PhaseSpec {
  int at = 0;           // index of the phase's first request
  std::string source;   // what the phase is, for the log: "generated 2000x8000" or a file name
  // GNN: the graph (generated or read). Transformer: seq_len x window.
  kernels::EdgeList graph;
  std::int64_t seq_len = 0, window = 0;
};

// "at:AxB,at:AxB": GNN phases generate a uniform graph of A nodes and B edges, transformer phases
// send A tokens with window B. The first phase starts at request 0; starts must increase.
// InputError naming --drift and the item on bad syntax.
std::vector<PhaseSpec> drift_phases(const std::string& drift, bool transformer, std::uint64_t seed);

// Every graph file of `dir` (Matrix Market .mtx; SNAP edge lists .txt, .edges, .el, .tsv), in name
// order, each for `per_file` requests. InputError when the folder is missing, holds no graph file,
// or a file does not parse (the reader's message names the file and line).
std::vector<PhaseSpec> directory_phases(const std::filesystem::path& dir, int per_file);

// A graph file by its extension: .mtx through the Matrix Market reader, anything else as a SNAP list.
kernels::EdgeList read_graph_file(const std::filesystem::path& path);

}  // namespace dype::client
