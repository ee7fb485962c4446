// What operator actions did to an engine's plan, for the e2e tests: swaps with one cause between
// two Engine::replan_counts() snapshots.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace dype::test {

using ReplanCounts = std::map<std::pair<std::string, bool>, std::uint64_t>;

inline std::uint64_t swaps_since(const ReplanCounts& before, const ReplanCounts& after, const std::string& cause) {
  const auto swaps = [&](const ReplanCounts& c) {
    const auto it = c.find({cause, true});
    return it == c.end() ? std::uint64_t{0} : it->second;
  };
  return swaps(after) - swaps(before);
}

}  // namespace dype::test
