#pragma once
// The SpMM plan cache every GPU backend keeps per queue: a vendor plan (sparse descriptors,
// workspace, preprocessing) is reused while the graph's three CSR buffers keep their identity and
// contents (GpuBuffer id and write generation). A new graph's plans replace the old graph's, and at
// most kMaxPlans are kept (least recently used goes first).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace dype::hw {

// (indptr id, generation, indices id, generation, values id, generation, m, k, n, nnz, index bytes)
using SpmmPlanKey = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                               std::uint64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>;

// The count of SpMM plans a GPU device has built, apart from its vendor (GpuDevice<Api> derives
// from it), so tools and tests can read it through dynamic_cast<SpmmPlanCount*>(&device).
class SpmmPlanCount {
 public:
  virtual ~SpmmPlanCount() = default;
  // SpMM plans built so far: reused while the graph is unchanged.
  int spmm_plans_built() const { return built_; }

 protected:
  void count_spmm_plan() { ++built_; }

 private:
  std::atomic<int> built_{0};
};

template <class Plan>
class SpmmPlanCache {
 public:
  static constexpr std::size_t kMaxPlans = 8;

  // The plan for `key`, or null when it must be built (then call insert).
  Plan* find(const SpmmPlanKey& key) {
    auto it = plans_.find(key);
    if (it == plans_.end()) return nullptr;
    it->second.last_use = ++uses_;
    return it->second.plan.get();
  }
  // Drops the plans of the graph whose buffers changed, evicts the least recently used beyond
  // kMaxPlans - 1, and keeps `plan` for `key`.
  Plan& insert(const SpmmPlanKey& key, std::unique_ptr<Plan> plan) {
    std::erase_if(plans_, [&](const auto& kv) {
      return std::get<0>(kv.first) == std::get<0>(key) || std::get<2>(kv.first) == std::get<2>(key);
    });
    if (plans_.size() >= kMaxPlans) {
      auto oldest = std::min_element(plans_.begin(), plans_.end(), [](const auto& a, const auto& b) {
        return a.second.last_use < b.second.last_use;
      });
      plans_.erase(oldest);
    }
    Entry& e = plans_[key];
    e.plan = std::move(plan);
    e.last_use = ++uses_;
    return *e.plan;
  }
  void clear() { plans_.clear(); }
  std::size_t size() const { return plans_.size(); }

 private:
  struct Entry {
    std::unique_ptr<Plan> plan;
    std::uint64_t last_use = 0;
  };
  std::map<SpmmPlanKey, Entry> plans_;
  std::uint64_t uses_ = 0;
};

}  // namespace dype::hw
