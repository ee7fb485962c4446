#pragma once
// dype-client infer: one request with the user's own inputs or generated ones, and its answer
// printed (shape, checksum, for small outputs each row's top classes) and optionally saved.
//
//   dype-client infer --model karate-gcn --graph models/karate/karate.mtx
//                     --features models/karate/features.npy --out logits.npy
#include <cstdint>
#include <string>

#include "transport.h"

namespace dype::client {

struct InferOptions {
  std::string model = "gcn";
  std::string graph;     // Matrix Market (.mtx) or SNAP edge list; empty: generated
  std::string features;  // .npy (float32/float64) or .safetensors (its tensor 'x', or its only one)
  std::string out;       // write the output as .npy (float32)
  int top_k = 2;         // classes printed per row for outputs of at most kMaxPrintedRows rows
  std::int64_t nodes = 1000, edges = 8000, seq_len = 256, window = -1;  // window -1: the model's default
  std::uint64_t seed = 1;
  std::string protocol_name = "http";
  bool shm = false;  // x and y through system shared-memory regions instead of the protocol
  bool cuda_shm = false;  // x and y through CUDA shared-memory regions (GPU memory) instead
  int cuda_device = 0;    // the CUDA device those regions are allocated on
};

// Returns the exit status (0); throws dype::Error on bad inputs or a refused request.
int run_infer(Transport& transport, const InferOptions& options);

}  // namespace dype::client
