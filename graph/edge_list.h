#pragma once
// A graph in coordinate form, as readers produce it and as PyG's edge_index [2, E] carries it.
#include <cstdint>
#include <vector>

namespace dype::kernels {

struct EdgeList {
  std::int64_t num_nodes = 0;
  std::vector<std::int64_t> src;  // edge e goes src[e] -> dst[e]
  std::vector<std::int64_t> dst;
  std::vector<float> weight;      // empty when unweighted, else one per edge

  std::int64_t num_edges() const { return static_cast<std::int64_t>(src.size()); }
};

}  // namespace dype::kernels
