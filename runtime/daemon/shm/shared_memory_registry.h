#pragma once
// Registered shared-memory regions (the KServe/Triton shared-memory extensions) and how requests
// use them. A client creates a POSIX shared-memory object (shm_open) or a CUDA buffer, registers a
// region of it under a name, and names the region in an input's or requested output's parameters
// (shared_memory_region, shared_memory_byte_size, shared_memory_offset): the input's bytes are
// read from the region and the output's written into it, none of them through the protocol.
//
//   SharedMemoryRegistry shm(/*allowed=*/true);                // dype-serve --allow-client-shm
//   shm.register_system("x", "/my_x", 0, bytes, owner);
//   bind_shared_memory(request, &shm, owner);                 // inputs view the region, outputs
//   ... build and run the request ...                         // get a sink writing into it
//   deliver_outputs(outputs, request.outputs);               // (request_builder.h)
//
// Safety. Off unless allowed (Forbidden, 403). A region belongs to the owner that registered it
// (the Dype-Graph-Owner key, else the client's address): another owner's is Forbidden and never
// listed. A system region is mapped once when registered (its object must be a regular shared-
// memory object holding offset + byte_size bytes) and held by every request using it, so
// unregistering one in use lets those requests finish. The object's size is checked at each use,
// and a client that shrinks it under a request cannot kill the daemon (guarded_mapping.h): that
// request is refused. Keys are shm_open names ("/name", no other '/').
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/daemon/kserve/tensor.h"

namespace dype::hw {
class DeviceIpcMemory;
class PinnedHostMemory;
}

namespace dype::rt::daemon {

class GuardedMapping;

struct SharedMemoryRegion {
  enum class Kind { system, cuda };
  std::string name;
  Kind kind = Kind::system;
  std::string owner;
  std::string key;           // system: the shm_open name
  std::uint64_t offset = 0;  // system: where the region starts in the object
  std::uint64_t byte_size = 0;
  std::int64_t device_id = -1;                        // cuda
  std::shared_ptr<const GuardedMapping> mapping;      // system
  // system: the mapping page-locked for the GPUs (hw/pinned_host_memory.h), when this process has
  // one; declared after `mapping`, so it is unpinned before it is unmapped.
  std::shared_ptr<const hw::PinnedHostMemory> pinned;
  std::shared_ptr<const hw::DeviceIpcMemory> device;  // cuda
  int fd = -1;                            // system: kept open to check its size at each use
  std::shared_ptr<const void> fd_closer;  // closes fd with the last holder
};

class SharedMemoryRegistry {
 public:
  explicit SharedMemoryRegistry(bool allowed, std::size_t max_regions = 256);
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  bool allowed() const { return allowed_; }
  // Forbidden naming --allow-client-shm when off.
  void check_allowed() const;

  // InputError naming the field for a bad name, key, size or offset, a key that is not a shared-
  // memory object, an object too small; AlreadyExists for a name already registered; Forbidden
  // when off.
  void register_system(const std::string& name, const std::string& key, std::uint64_t offset,
                       std::uint64_t byte_size, const std::string& owner);
  void register_cuda(const std::string& name, std::string_view raw_handle, std::int64_t device_id,
                     std::uint64_t byte_size, const std::string& owner);
  // One region (none of that name: nothing to do, as in Triton; another owner's: Forbidden) or,
  // given nullopt, every region of that kind the owner has.
  void unregister(SharedMemoryRegion::Kind kind, const std::optional<std::string>& name,
                  const std::string& owner);
  // The owner's regions of that kind, by name; one (NotFound) when `name` is given.
  std::vector<SharedMemoryRegion> status(SharedMemoryRegion::Kind kind,
                                         const std::optional<std::string>& name,
                                         const std::string& owner) const;

  // The region `name` for `owner`: NotFound (unknown), Forbidden (another owner's), InputError
  // naming `where` when [offset, offset + size) runs past it.
  std::shared_ptr<const SharedMemoryRegion> use(const SharedMemoryRef& ref,
                                                const std::string& owner,
                                                const std::string& where) const;

 private:
  // AlreadyExists for a name taken, InputError when the server holds its limit of regions.
  void check_free(const std::string& name) const;
  void check_free_locked(const std::string& name) const;
  void add(std::shared_ptr<const SharedMemoryRegion> region);

  bool allowed_;
  std::size_t max_regions_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>>
      regions_;  // one namespace for both kinds
};

// Whether any input or requested output of the request names a shared-memory region.
bool names_shared_memory(const InferRequest& request);

// Binds the request's shared-memory inputs (their `view` into the region, held by `request.held`)
// and outputs (a sink writing into the region). A request naming shared memory while `registry`
// is null or off is Forbidden. Inputs of CUDA regions are copied to the host once here.
void bind_shared_memory(InferRequest& request, const SharedMemoryRegistry* registry,
                        const std::string& owner);

}  // namespace dype::rt::daemon
