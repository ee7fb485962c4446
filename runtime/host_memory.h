#pragma once
// How the process's C heap treats large host buffers. Activations of full-graph GNNs and long
// sequences are tens of MB each, and glibc serves every block above its mmap threshold (at most
// 32 MB) with a fresh mmap and returns it with munmap when freed: each request then faults in
// every page of every activation again. On this project's VM that was 95% of a GCN forward on a
// 68k-node graph (738 ms; 29 ms with the heap kept; measured with bench_model_inference). The
// PyTorch peers in bench/ get the same policy through GLIBC_TUNABLES. One arena: a request's
// input is allocated on whichever front-end thread took it (32 HTTP workers, gRPC's pool) and freed
// on an engine thread, so with an arena per thread the next request's x rarely found the freed
// block in its own arena and faulted in 35 MB again (15 ms of a 31 ms shared-memory request on the
// 2-core VM; 2.7 ms with one arena, measured). Small blocks still come from each thread's tcache.
//
//   rt::retain_freed_host_memory();  // first thing in main(), before threads start
//   ...
//   rt::release_free_host_memory();  // after a model is unloaded: RSS goes back down
#include <cstddef>

namespace dype::rt {

// Serves large blocks from the heap, from one arena, and keeps up to `keep_bytes` of freed memory
// at its top for reuse (mallopt M_MMAP_MAX = 0, M_ARENA_MAX = 1, M_TRIM_THRESHOLD). Call once, early, from a program's main().
// Returns false when the C library refused (then nothing changed).
bool retain_freed_host_memory(std::size_t keep_bytes = std::size_t{1} << 30);

// Hands free heap pages back to the kernel (malloc_trim), e.g. after an unload, so the resident
// size reflects what is in use. Returns whether any memory was released.
bool release_free_host_memory();

}  // namespace dype::rt
