#pragma once
// Synthetic input specifications for profiling (paper Section V, step 1): shapes drawn
// log-uniformly across the ranges the workloads reach, and their materialisation as real inputs.
//
//   SyntheticRanges r;                        // densities 1e-7..1e-2, rows 1e3..1e6, ...
//   r.max_work = 5e8;                         // what one timed run may cost on this device
//   auto specs = generate_specs(OpKind::spmm, r, 200, /*seed=*/1);
//   auto csr = materialise_csr(specs[0]);     // when !specs[0].timing_only
#include <cstdint>
#include <vector>

#include "common/csr.h"
#include "common/op.h"

namespace dype::perf {

enum class DegreeDistribution : std::uint8_t { uniform, power_law };

struct InputSpec {
  kernels::OpShape shape;
  DegreeDistribution degrees = DegreeDistribution::uniform;
  double power_law_alpha = 2.1;  // P(degree = d) ~ d^-alpha for power_law
  // Community structure with ids numbered by community, as real graphs come (packages, synsets and
  // crawled pages are numbered near their relatives): this share of each row's columns is drawn
  // uniformly from the `community` ids around the row's own position, the rest as above.
  double local_share = 0.0;
  std::int64_t community = 0;
  std::uint64_t seed = 0;
  // Too large to materialise under SyntheticRanges::max_bytes: only devices that report time
  // without touching data (emulated ones in timing-only mode) can run it.
  bool timing_only = false;
};

struct SyntheticRanges {
  // SpMM
  double density_min = 1e-7, density_max = 1e-2;
  double rows_min = 1e3, rows_max = 1e6;
  double feature_min = 16, feature_max = 1024;
  // Window attention
  double seq_min = 1024, seq_max = 16384;
  double window_min = 512, window_max = 4096;
  std::int64_t head_dim = 64;
  std::vector<std::int64_t> heads = {4, 8, 12, 16};
  // GEMM (transformer shapes): d_model choices; projections d->3d, d->d, FFN d->4d, 4d->d.
  std::vector<std::int64_t> d_model = {256, 512, 768, 1024};
  // Cost caps. A spec whose multiply-adds exceed max_work is redrawn (it would blow the profiling
  // budget); one whose inputs exceed max_bytes is marked timing_only (or redrawn when
  // allow_timing_only is false).
  double max_work = 2e10;
  double max_bytes = 512.0 * 1024 * 1024;
  bool allow_timing_only = false;
  // Operands of one point must fit in the device's memory even when timing-only (an emulated
  // device still accounts for the size of size-only buffers); 0 = no cap. Redrawn otherwise.
  double max_device_bytes = 0;
  double power_law_share = 0.5;  // fraction of SpMM specs with power-law degrees
  // Fraction of SpMM specs with community structure (local_share 0.2-0.95, communities of
  // community_min..community_max ids, log-uniform).
  double community_share = 0.5;
  double community_min = 16, community_max = 65536;
  // Fraction of SpMM feature lengths rounded to a multiple of `feature_align` (and at least that),
  // the rest log-uniform integers. GNN layers run at widths such as 16, 64, 128, 256 (multiples of 4
  // and 8), and a GPU's SpMM moves such rows in float4s: 4x fewer lane passes than at an odd width.
  // A profile of log-uniform integers alone saw such widths a quarter of the time and priced every
  // real width as if it were unaligned (perfmodel/README.md). 0 leaves the draws as they were.
  double aligned_feature_share = 0.0;
  std::int64_t feature_align = 8;
};

// Multiply-add count of a shape (the quantity max_work caps).
double work_of(const kernels::OpShape& shape);
// Bytes of inputs + outputs to materialise the shape in FP32 / int32 CSR.
double bytes_of(const kernels::OpShape& shape);

// `count` specs for `kind`, deterministic in `seed`. Sizes are log-uniform so every decade of the
// range is covered equally and a budget cut-off still leaves a spread sample.
std::vector<InputSpec> generate_specs(kernels::OpKind kind, const SyntheticRanges& ranges,
                                      int count, std::uint64_t seed);

// A CSR matrix for an SpMM spec: rows x k, about nnz entries (duplicates within a row are merged,
// so nnz can come out slightly lower; the returned matrix's nnz is exact), values in [-1, 1).
// Uniform: every row ~ Poisson(nnz / rows), columns uniform. Power law: row degrees ~ Zipf(alpha),
// rescaled to nnz, columns drawn with the same weights (Chung-Lu: hubs in both directions).
// With local_share > 0 that share of each row's columns comes from its community instead.
kernels::CsrI32 materialise_csr(const InputSpec& spec);

// Expected degree skew of the matrix materialise_csr(spec) would build, without building it
// (timing-only runs).
double estimated_skew(const InputSpec& spec);

// Up to `count` more feature lengths N, log-uniform over the ranges and different from the spec's,
// at which the graph `spec` materialised (`nnz` exact) stays within the caps (max_work, max_bytes,
// max_device_bytes): building a graph costs far more than timing it, so the profiler times each
// graph at several N. Deterministic in spec.seed; fewer (or none) when the caps leave no room.
std::vector<std::int64_t> other_feature_lengths(const InputSpec& spec, std::int64_t nnz, const SyntheticRanges& ranges,
                                                int count);

}  // namespace dype::perf
