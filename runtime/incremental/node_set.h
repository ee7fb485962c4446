#pragma once
// A set of graph nodes that costs what it holds: a bitmap over the graph's nodes while clearing one
// is cheaper than hashing a neighbourhood (graphs up to kDenseNodes), a hash set past that, so a
// walk from a few nodes of a huge graph does not touch memory for all of them.
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace dype::rt {

class NodeSet {
 public:
  static constexpr std::int64_t kDenseNodes = std::int64_t{1} << 22;

  explicit NodeSet(std::int64_t nodes) : dense_(nodes <= kDenseNodes) {
    if (dense_) bits_.assign(static_cast<std::size_t>(nodes), 0);
  }
  // True when `u` was not in the set.
  bool insert(std::int64_t u) {
    if (!dense_) return hashed_.insert(u).second;
    char& b = bits_[static_cast<std::size_t>(u)];
    if (b) return false;
    b = 1;
    return true;
  }
  // Empties it; `members` lists what it holds (cheaper than clearing the bitmap whole).
  template <class Ids>
  void clear(const Ids& members) {
    if (!dense_) {
      hashed_.clear();
      return;
    }
    for (const auto u : members) bits_[static_cast<std::size_t>(u)] = 0;
  }

 private:
  bool dense_;
  std::vector<char> bits_;
  std::unordered_set<std::int64_t> hashed_;
};

}  // namespace dype::rt
