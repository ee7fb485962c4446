#pragma once
// The gather locality of a sparse matrix (OpShape::locality): how often SpMM's gathers of X rows
// would miss an LRU cache of each size, estimated in one pass over the column indices.
//
//   kernels::GatherLocality loc = gather_locality(csr.indices, csr.cols);
//   double miss = loc.miss_at(2.0 * 1024 * 1024 / (4.0 * 64));   // 2 MiB of 64-float rows
//
// Method: footprint theory (Xiang et al., "HOTL", ASPLOS 2013). The average number of distinct
// columns in a window of w consecutive gathers, fp(w), follows exactly from the histogram of reuse
// times and first/last access times; the miss ratio of a cache of C rows is fp's slope where
// fp(w) = C. Columns are sampled by hash (SHARDS, Waldspurger et al., FAST 2015) so the state stays
// bounded (every column up to 256k, a hash sample of 256k beyond) whatever the graph: the pass costs a hash per nonzero.
#include <cstdint>
#include <span>

#include "common/op.h"

namespace dype::kernels {

// Column indices in row order (CSR `indices`), over `cols` columns. Deterministic: the sample
// depends only on column ids.
GatherLocality gather_locality(std::span<const std::int32_t> indices, std::int64_t cols);

}  // namespace dype::kernels
