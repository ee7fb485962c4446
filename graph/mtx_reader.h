#pragma once
// Matrix Market (.mtx) reader: coordinate format, 1-based indices, general / symmetric /
// skew-symmetric, pattern / real / integer fields. Entry (i, j) becomes the edge i-1 -> j-1 (the
// adjacency convention: A[i][j] != 0 means an edge from i to j); symmetric files list one triangle
// and the reader mirrors every off-diagonal entry. Every problem raises InputError whose message
// reads "<file>:<line>: <problem>", e.g. "graph.mtx:17: row index 0 out of range [1, 1000]".
//
//   EdgeList g = dype::kernels::read_mtx("configs/graphs/karate.mtx");
//   // g.num_nodes == 34, g.weight empty for pattern files
//
// Fast enough for 100M-entry files: block reads and std::from_chars, no iostreams.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "graph/edge_list.h"

namespace dype::kernels {

enum class MtxField : std::uint8_t { pattern, real, integer };
enum class MtxSymmetry : std::uint8_t { general, symmetric, skew_symmetric };

// The banner and size line of a file.
struct MtxHeader {
  MtxField field = MtxField::pattern;
  MtxSymmetry symmetry = MtxSymmetry::general;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t entries = 0;  // entries stored in the file (before mirroring)
};

struct MtxOptions {
  // Keep real/integer values as edge weights (false: read and check them, then drop them).
  bool read_values = true;
  // A graph's adjacency matrix is square. When true a rows x cols matrix is read as a graph on
  // max(rows, cols) nodes instead of being rejected.
  bool allow_rectangular = false;
};

// Reads a file. Throws InputError naming the file and line on any malformed content.
EdgeList read_mtx(const std::filesystem::path& path, const MtxOptions& options = {});
// Reads Matrix Market text held in memory; `name` stands for the file name in errors.
EdgeList parse_mtx(std::string_view text, const std::string& name, const MtxOptions& options = {});
// Reads only the banner and size line (cheap: for sizing a request before loading it).
MtxHeader read_mtx_header(const std::filesystem::path& path);

}  // namespace dype::kernels
