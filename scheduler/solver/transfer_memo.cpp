#include "scheduler/solver/transfer_memo.h"

namespace dype::sched::detail {

TransferMemo::TransferMemo(const CostModel& base, const SystemSpec& system) : base_(base) {
  offset_.push_back(0);
  for (const DeviceKindSpec& k : system.kinds) offset_.push_back(offset_.back() + (k.count > 0 ? k.count : 0));
  const int n = base.num_kernels();
  const std::size_t cells =
      static_cast<std::size_t>(n > 1 ? n - 1 : 0) * static_cast<std::size_t>(offset_.back()) * offset_.back();
  sides_.resize(cells);
  known_.assign(cells, 0);
}

int TransferMemo::group_index(DeviceGroup g) const {
  if (g.kind < 0 || g.kind + 1 >= static_cast<int>(offset_.size())) return -1;
  const int first = offset_[static_cast<std::size_t>(g.kind)], end = offset_[static_cast<std::size_t>(g.kind) + 1];
  return g.count >= 1 && first + g.count <= end ? first + g.count - 1 : -1;
}

const CostModel::Sides& TransferMemo::sides(int k, DeviceGroup from, DeviceGroup to) const {
  const int a = group_index(from), b = group_index(to);
  const auto groups = static_cast<std::size_t>(offset_.back());
  if (a < 0 || b < 0 || k < 0 || static_cast<std::size_t>(k) * groups * groups >= sides_.size()) {
    scratch_ = base_.transfer_sides(k, from, to);
    return scratch_;
  }
  const std::size_t at = (static_cast<std::size_t>(k) * groups + static_cast<std::size_t>(a)) * groups +
                         static_cast<std::size_t>(b);
  if (!known_[at]) {
    sides_[at] = base_.transfer_sides(k, from, to);
    known_[at] = 1;
  }
  return sides_[at];
}

}  // namespace dype::sched::detail
