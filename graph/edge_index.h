#pragma once
// Validation of graph tensors as they arrive over the network (PyG conventions), turning them into
// an EdgeList or a CSR matrix. Every problem raises InputError naming the field and position, e.g.
// "edge_index[1][17]: node 1000 out of range [0, 1000)", so a server can answer 400 with it.
//
//   // edge_index INT64 [2, E], row-major: sources then destinations
//   EdgeList g = edge_index_to_edge_list(flat, shape, /*num_nodes=*/1000, edge_weight);
//
// CSR input is PyG's adj_t, the matrix SpMM multiplies: row r gathers from the columns listed in
// indices[indptr[r] .. indptr[r+1]), i.e. entry (r, c) is the edge c -> r.
#include <cstdint>
#include <optional>
#include <span>

#include "common/csr.h"
#include "graph/edge_list.h"

namespace dype::kernels {

// edge_index: flat row-major data of a [2, E] tensor with the given shape. num_nodes: the node
// count (the row count of x); when absent it is inferred as max id + 1, as PyG does.
// edge_weight: one finite weight per edge, or absent.
EdgeList edge_index_to_edge_list(std::span<const std::int64_t> edge_index,
                                 std::span<const std::int64_t> shape,
                                 std::optional<std::int64_t> num_nodes,
                                 std::optional<std::span<const float>> edge_weight = std::nullopt);

// Checks only (no copy): the same checks as edge_index_to_edge_list, for a caller that keeps the
// tensors. Returns the node count (given or inferred).
std::int64_t validate_edge_index(std::span<const std::int64_t> edge_index,
                                 std::span<const std::int64_t> shape,
                                 std::optional<std::int64_t> num_nodes,
                                 std::optional<std::span<const float>> edge_weight = std::nullopt);

// CSR input on num_nodes x num_nodes: indptr has num_nodes + 1 entries, starts at 0, never
// decreases and ends at indices.size(); every index is in [0, num_nodes); values (optional) has
// one finite value per index.
void validate_csr_input(std::span<const std::int64_t> indptr, std::span<const std::int64_t> indices,
                        std::int64_t num_nodes,
                        std::optional<std::span<const float>> values = std::nullopt);

// Validates and copies into a CSR matrix; absent values become 1.
CsrI64 csr_input_to_csr(std::span<const std::int64_t> indptr,
                        std::span<const std::int64_t> indices, std::int64_t num_nodes,
                        std::optional<std::span<const float>> values = std::nullopt);

// Validates and converts to the equivalent edge_index form (entry (r, c) -> edge c -> r).
EdgeList csr_input_to_edge_list(std::span<const std::int64_t> indptr,
                                std::span<const std::int64_t> indices, std::int64_t num_nodes,
                                std::optional<std::span<const float>> values = std::nullopt);

}  // namespace dype::kernels
