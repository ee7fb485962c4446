// Block partitioning and Kernighan-Lin style refinement (Tavarageri et al., seed 001, section 2,
// phases 3 and 4), on our chain of kernels.
//
// pass 1: block partition  the chain (already in topological order) cut into k blocks of about
//                          C / k each, k the devices, C the total node cost; the blocks mapped to
//                          devices.
// pass 2: refinement       kernels moved between devices, in passes: a move by the communication
//                          rule, (D(r) < D(q)) and (C_r + c - C/k <= eps) and (C/k - (C_q - c) <= eps),
//                          or by the load rule, (C_r + c < C/k) and (C_q - c > C/k); each kernel
//                          moves at most once a pass (Kernighan-Lin's locking) and the passes stop
//                          when one moves nothing.
// pass 3: caps             the objective's caps (heuristic.h), for balanced and qos.
//
// Adaptation to pipeline stages (not in the paper):
//  - The devices are the physical devices, max_count(kind) of each kind, so k is their total. The
//    paper models one device per partition, so each device's block is one stage on that device
//    alone (count 1): its load C_D is then exactly the stage's compute and a cut edge exactly the
//    hand-off between two stages. Blocks on two devices of one kind stay two stages; devices a plan
//    leaves without kernels are unused. So counts are always 1.
//  - Node cost c(k): the paper's costs are per device; the block partition needs one number per
//    node, so it uses the kernel's mean single-device time over the kinds that can run it, and
//    C = the sum of those. A device's load C_D is its block's time on that device,
//    compute(a, b, (kind, 1)) (the sum of its kernels' times for additive models), and c the change
//    a move makes to it.
//  - Block cuts: kernel k goes to block floor((cost before k + c(k) / 2) / (C / k)), so each
//    block's cost is C / k to within half a kernel; k may exceed the kernels (blocks left empty).
//  - Mapping (the paper: "the k partitions are mapped to k devices", not which to which): blocks in
//    chain order, each to the free device that holds the most of it, then the one that runs it
//    fastest. A device holds [a, e] when compute(a, e) < kInf and the kernels after e can still be
//    covered by single devices left (Completion, heuristic.h); a block no free device holds whole
//    is cut where its device stops and the rest starts the next block; when no device can stop
//    inside the block, the device takes kernels past its end.
//  - Moves keep each device's kernels contiguous (a stage is one run): only the first or last
//    kernel of a block moves, to the neighbouring block or (load rule) to an unused device, where
//    it becomes a block of its own. The communication rule reads D = E - I over a kernel's incoming
//    edge as the paper does: a block's first kernel has D = +w where it is and -w on its
//    predecessor's device, so the rule moves it to the previous block whenever the hand-off takes
//    any time (w = transfer out + in > 0) and the loads allow it. The load rule's target is the
//    device left with the smaller load.
//  - eps, which the paper leaves open, is 10% of the ideal share C / k.
// It optimises load balance and communication, never energy, whatever the objective.
#include "scheduler/solver/kl_partition.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "scheduler/solver/format.h"
#include "scheduler/solver/heuristic.h"

namespace dype::sched::detail {

namespace {

constexpr double kEpsShare = 0.1;  // eps = kEpsShare x C / k

struct Part {
  int a = 0, b = 0, kind = 0;  // kernels [a, b] on one device of `kind`
};

class Partition {
 public:
  explicit Partition(const CostTables& t) : t_(t), kc1_(t.num_kinds(), -1) {
    for (int kind = 0; kind < t.num_kinds(); ++kind) {
      if (t.max_count(kind) >= 1) kc1_[kind] = t.kc({kind, 1});
    }
  }
  int kc1(int kind) const { return kc1_[kind]; }
  // A device's load: its kernels' time on it (0 for none).
  double load(int a, int b, int kind) const { return b < a ? 0.0 : t_.compute(a, b, kc1_[kind]); }
  // Every block runnable, the ends allowed, at most max_count devices of each kind.
  bool valid(const std::vector<Part>& ps) const {
    std::vector<int> used(t_.num_kinds(), 0);
    for (std::size_t s = 0; s < ps.size(); ++s) {
      const int kc = kc1_[ps[s].kind];
      if (!(load(ps[s].a, ps[s].b, ps[s].kind) < kInf)) return false;
      if (s == 0 && !(t_.entry(kc) < kInf)) return false;
      if (s + 1 == ps.size() && !(t_.exit(kc) < kInf)) return false;
      if (++used[ps[s].kind] > t_.max_count(ps[s].kind)) return false;
    }
    return true;
  }
  std::vector<StageSpec> stages(const std::vector<Part>& ps) const {
    std::vector<StageSpec> st;
    for (const Part& p : ps) st.push_back({p.a, p.b, kc1_[p.kind]});
    return st;
  }

 private:
  const CostTables& t_;
  std::vector<int> kc1_;
};

}  // namespace

Found solve_kl(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const int n = t.num_kernels(), kcs = t.num_kc();
  const HeuristicName name{.solver = "kl", .method = "KL", .number = 3};
  const Partition part(t);

  // pass 1: block partition into k blocks of C / k, mapped to devices in chain order.
  const Pass blocks{.number = 1, .name = "block partition: C / k per device"};
  int devices = 0;
  for (int kind = 0; kind < t.num_kinds(); ++kind) devices += t.max_count(kind);
  std::vector<double> cost(n);
  double total = 0;
  for (int k = 0; k < n; ++k) total += cost[k] = mean_compute(t, k, 1);
  const double share = devices > 0 ? total / devices : 0.0;
  std::vector<int> block_end(n);  // the last kernel of kernel k's block
  {
    std::vector<int> block(n);
    double before = 0;
    for (int k = 0; k < n; ++k) {
      block[k] = share > 0 ? std::min(devices - 1, static_cast<int>(std::floor((before + cost[k] / 2) / share))) : 0;
      before += cost[k];
    }
    for (int k = n - 1; k >= 0; --k) block_end[k] = k + 1 < n && block[k + 1] == block[k] ? block_end[k + 1] : k;
  }
  const Usage us(t);
  const Completion can(t, us, 1);
  std::vector<Part> parts;
  int u = 0;
  for (int a = 0; a < n;) {
    int best_kind = -1, best_e = -1, best_u = -1;
    double best_c = kInf;
    for (const int limit : {block_end[a], n - 1}) {  // past the block's end only when nothing stops in it
      for (int kind = 0; kind < t.num_kinds(); ++kind) {
        if (part.kc1(kind) < 0) continue;
        const int u2 = us.next[static_cast<std::size_t>(u) * kcs + part.kc1(kind)];
        if (u2 < 0) continue;
        const int e = can.last_close(a, a, part.kc1(kind), u2, limit);
        if (e < 0) continue;
        const double c = part.load(a, e, kind);
        if (e > best_e || (e == best_e && c < best_c)) best_kind = kind, best_e = e, best_u = u2, best_c = c;
      }
      if (best_kind >= 0) break;
    }
    if (best_kind < 0) {  // no single device left can run kernel a: only when no such pipeline exists
      parts.clear();
      break;
    }
    parts.push_back({a, best_e, best_kind});
    u = best_u;
    a = best_e + 1;
  }
  if (log) {
    log->add(blocks, name.method, priced(part.stages(parts), t),
             PassLog::count(devices, "device") + ", C / k " + fmt(share, "s") + ", " +
                 PassLog::count(parts.size(), "block"));
  }
  if (parts.empty()) return answer(t, o, caps, log, {}, name);

  // pass 2: refinement by the communication and load rules, each kernel moving once a pass.
  const Pass refine{.number = 2, .name = "Kernighan-Lin refinement"};
  const double eps = kEpsShare * share;
  int moves = 0, passes = 0;
  for (int pass = 0; pass < 2 * n + 2; ++pass) {
    ++passes;
    std::vector<char> locked(n, 0);
    bool moved = false;
    for (int i = 0; i < n; ++i) {
      if (locked[i]) continue;
      int q = 0;
      while (parts[q].b < i) ++q;
      const Part pq = parts[q];
      std::vector<Part> best;
      // The communication rule: a block's first kernel to its predecessor's device.
      if (i == pq.a && q > 0) {
        const Part& pr = parts[q - 1];
        const int from = part.kc1(pr.kind), to = part.kc1(pq.kind);
        const double w = t.transfer_out(i - 1, from, to) + t.transfer_in(i - 1, from, to);
        const double lr = part.load(pr.a, i, pr.kind), lq = part.load(i + 1, pq.b, pq.kind);
        if (w > 0 && lr - share <= eps && share - lq <= eps) {
          std::vector<Part> c = parts;
          c[q - 1].b = i;
          c[q].a = i + 1;
          if (c[q].a > c[q].b) c.erase(c.begin() + q);
          if (part.valid(c)) best = std::move(c);
        }
      }
      // The load rule: a block's end kernel to a neighbour or an unused device with room below C / k.
      if (best.empty()) {
        double best_lr = kInf;
        const auto consider = [&](std::vector<Part> c, double lr, double lq) {
          if (!(lr < share && lq > share && lr < best_lr)) return;
          c.erase(std::remove_if(c.begin(), c.end(), [](const Part& p) { return p.a > p.b; }), c.end());
          if (part.valid(c)) best = std::move(c), best_lr = lr;
        };
        if (i == pq.a && q > 0) {
          std::vector<Part> c = parts;
          c[q - 1].b = i, c[q].a = i + 1;
          consider(std::move(c), part.load(parts[q - 1].a, i, parts[q - 1].kind), part.load(i + 1, pq.b, pq.kind));
        }
        if (i == pq.b && q + 1 < static_cast<int>(parts.size())) {
          std::vector<Part> c = parts;
          c[q + 1].a = i, c[q].b = i - 1;
          consider(std::move(c), part.load(i, parts[q + 1].b, parts[q + 1].kind), part.load(pq.a, i - 1, pq.kind));
        }
        if (pq.a < pq.b && (i == pq.a || i == pq.b)) {
          for (int kind = 0; kind < t.num_kinds(); ++kind) {
            if (part.kc1(kind) < 0) continue;
            std::vector<Part> c = parts;
            if (i == pq.a) {
              c[q].a = i + 1;
              c.insert(c.begin() + q, Part{i, i, kind});
            } else {
              c[q].b = i - 1;
              c.insert(c.begin() + q + 1, Part{i, i, kind});
            }
            // valid() refuses a kind with no device left.
            consider(std::move(c), part.load(i, i, kind),
                     i == pq.a ? part.load(i + 1, pq.b, pq.kind) : part.load(pq.a, i - 1, pq.kind));
          }
        }
      }
      if (!best.empty()) {
        parts = std::move(best);
        locked[i] = 1;
        moved = true;
        ++moves;
      }
    }
    if (!moved) break;
  }
  std::vector<StageSpec> stages = part.stages(parts);
  if (log) {
    log->add(refine, name.method, priced(stages, t),
             PassLog::count(moves, "move") + " in " + std::to_string(passes) + (passes == 1 ? " pass" : " passes"));
  }
  return answer(t, o, caps, log, std::move(stages), name);
}

}  // namespace dype::sched::detail
