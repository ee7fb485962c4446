#include "runtime/daemon/shm/shared_memory_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "hw/device_ipc_memory.h"
#include "hw/pinned_host_memory.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/shm/guarded_mapping.h"
#include "runtime/model.h"

namespace dype::rt::daemon {
namespace {

using Kind = SharedMemoryRegion::Kind;

const char* kind_name(Kind k) {
  return k == Kind::system ? "system" : "CUDA";
}

void check_name(const std::string& name) {
  if (name.empty() || name.size() > 256)
    throw InputError("name", "a region's name must be 1 to 256 characters");
  for (const char c : name)
    if (c < 0x21 || c > 0x7e)
      throw InputError("name", "a region's name must be printable ASCII without spaces");
}

std::uint64_t object_size(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

// An input's bytes as the request views them, held until the request is built.
class HeldRegion final : public HeldMemory {
 public:
  HeldRegion(std::shared_ptr<const SharedMemoryRegion> region, std::uint64_t end)
      : region_(std::move(region)), end_(end) {}
  void check_read(const std::string& where) const override {
    if (!region_->mapping->intact() || object_size(region_->fd) < end_)
      throw InputError(where,
                       "region '" + region_->name + "' shrank while it was read (its object '" +
                           region_->key +
                           "' was truncated): the request is refused; register the region again");
  }

 private:
  std::shared_ptr<const SharedMemoryRegion> region_;
  std::uint64_t end_;  // the object's bytes the input needs
};

class RegionSink final : public OutputSink {
 public:
  RegionSink(std::shared_ptr<const SharedMemoryRegion> region, SharedMemoryRef ref)
      : region_(std::move(region)), ref_(std::move(ref)) {}
  std::shared_ptr<const AnswerMemory> memory_for(std::size_t bytes) const override {
    if (bytes > ref_.byte_size) return nullptr;
    if (region_->kind == Kind::cuda) {
      // GPU memory: a last stage on that GPU copies its rows there device to device, any other
      // stage through the host. Device memory cannot shrink under the writer.
      if (!region_->device || ref_.offset % alignof(float) != 0) return nullptr;
      auto m = std::make_shared<AnswerMemory>();
      m->keep = region_;
      m->device = region_->device;
      m->device_offset = ref_.offset;
      m->bytes = bytes;
      m->written = written_;
      return m;
    }
    // A system region, aligned for FP32, and whole now.
    char* at = region_->mapping->data() + ref_.offset;
    const std::uint64_t end = region_->offset + ref_.offset + bytes;
    if (reinterpret_cast<std::uintptr_t>(at) % alignof(float) != 0 || !region_->mapping->intact() ||
        object_size(region_->fd) < end)
      return nullptr;
    auto m = std::make_shared<AnswerMemory>();
    m->keep = region_;
    m->data = reinterpret_cast<float*>(at);
    m->bytes = bytes;
    m->intact = [r = region_, end] { return r->mapping->intact() && object_size(r->fd) >= end; };
    m->written = written_;
    return m;
  }
  bool written_in_place() const override { return written_->load(); }

  void write(std::string_view bytes, const std::string& where) const override {
    if (written_->load()) {  // the engine's download wrote it here: only check it stayed whole
      if (region_->kind == Kind::system && !region_->mapping->intact())
        throw InputError(where,
                         "region '" + region_->name + "' shrank while the output was written");
      return;
    }
    if (bytes.size() > ref_.byte_size)
      throw InputError(where + ".parameters.shared_memory_byte_size",
                       std::to_string(ref_.byte_size) + " bytes cannot hold the output's " +
                           std::to_string(bytes.size()));
    if (region_->kind == Kind::cuda) {
      region_->device->write(ref_.offset, bytes.data(), bytes.size());
      return;
    }
    const std::uint64_t end = region_->offset + ref_.offset + bytes.size();
    if (!region_->mapping->intact() || object_size(region_->fd) < end)
      throw InputError(
          where, "region '" + region_->name + "': its object '" + region_->key + "' was truncated");
    std::memcpy(region_->mapping->data() + ref_.offset, bytes.data(), bytes.size());
    if (!region_->mapping->intact())
      throw InputError(where, "region '" + region_->name + "' shrank while the output was written");
  }

 private:
  std::shared_ptr<const SharedMemoryRegion> region_;
  SharedMemoryRef ref_;
  std::shared_ptr<std::atomic<bool>> written_ = std::make_shared<std::atomic<bool>>(false);
};

std::shared_ptr<SharedMemoryRegion> new_region(const std::string& name, Kind kind,
                                               const std::string& owner, std::uint64_t byte_size) {
  auto r = std::make_shared<SharedMemoryRegion>();
  r->name = name;
  r->kind = kind;
  r->owner = owner;
  r->byte_size = byte_size;
  return r;
}

}  // namespace

SharedMemoryRegistry::SharedMemoryRegistry(bool allowed, std::size_t max_regions)
    : allowed_(allowed), max_regions_(max_regions) {}

SharedMemoryRegistry::~SharedMemoryRegistry() = default;

void SharedMemoryRegistry::check_allowed() const {
  if (!allowed_)
    throw Forbidden(
        "shared memory is off: dype-serve accepts client shared-memory regions only with "
        "--allow-client-shm");
}

void SharedMemoryRegistry::register_system(const std::string& name, const std::string& key,
                                           std::uint64_t offset, std::uint64_t byte_size,
                                           const std::string& owner) {
  check_allowed();
  check_name(name);
  if (key.size() < 2 || key.size() > 255 || key[0] != '/' || key.find('/', 1) != std::string::npos)
    throw InputError(
        "key",
        "'" + key +
            "' is not a shared-memory object name (\"/name\", as shm_open takes, no other '/')");
  if (byte_size == 0) throw InputError("byte_size", "must be at least 1");
  if (offset > (std::uint64_t{1} << 48) || byte_size > (std::uint64_t{1} << 40))
    throw InputError(offset > (std::uint64_t{1} << 48) ? "offset" : "byte_size", "is too large");
  auto region = new_region(name, Kind::system, owner, byte_size);
  region->key = key;
  region->offset = offset;
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw InputError("key", "'" + key + "' is not a shared-memory object this server can open: " +
                                std::strerror(errno));
  region->fd = fd;
  region->fd_closer = std::shared_ptr<const void>(nullptr, [fd](const void*) { close(fd); });
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw InputError("key", "'" + key + "' is not a shared-memory object");
  if (static_cast<std::uint64_t>(st.st_size) < offset + byte_size)
    throw InputError("byte_size", "offset " + std::to_string(offset) + " + byte_size " +
                                      std::to_string(byte_size) + " runs past the end of '" + key +
                                      "' (" + std::to_string(st.st_size) + " bytes)");
  region->mapping = std::make_shared<const GuardedMapping>(fd, offset, byte_size, /*writable=*/true,
                                                           "key '" + key + "'");
  // Pinned once here, so GPU stages copy x from it, and y into it, without the staging copy.
  std::string why_not;
  region->pinned = hw::pin_host_memory(region->mapping->data(), byte_size, &why_not);
  if (region->pinned)
    spdlog::info("shared memory region '{}': {} bytes pinned for {}", name, byte_size,
                 region->pinned->backends());
  else
    spdlog::debug("shared memory region '{}': not pinned ({})", name, why_not);
  add(std::move(region));
}

void SharedMemoryRegistry::register_cuda(const std::string& name, std::string_view raw_handle,
                                         std::int64_t device_id, std::uint64_t byte_size,
                                         const std::string& owner) {
  check_allowed();
  check_name(name);
  if (byte_size == 0) throw InputError("byte_size", "must be at least 1");
  if (!hw::gpu_ipc_built())
    throw NotSupported("CUDA shared memory: this dype-serve was built without CUDA or HIP");
  if (device_id < 0 || device_id > 1024)
    throw InputError("device_id", "must be a GPU device index");
  check_free(name);  // before opening the handle; add() checks again
  auto region = new_region(name, Kind::cuda, owner, byte_size);
  region->device_id = device_id;
  region->device = hw::open_device_ipc_memory(raw_handle, static_cast<int>(device_id), byte_size);
  add(std::move(region));
}

void SharedMemoryRegistry::check_free(const std::string& name) const {
  std::lock_guard lock(mu_);
  check_free_locked(name);
}

void SharedMemoryRegistry::check_free_locked(const std::string& name) const {
  if (regions_.count(name))
    throw AlreadyExists("a shared-memory region named '" + name +
                        "' is already registered; unregister it first");
  if (regions_.size() >= max_regions_)
    throw InputError("name",
                     "the server holds its limit of " + std::to_string(max_regions_) + " regions");
}

void SharedMemoryRegistry::add(std::shared_ptr<const SharedMemoryRegion> region) {
  std::lock_guard lock(mu_);
  check_free_locked(region->name);
  const std::string name = region->name;
  regions_[name] = std::move(region);
}

void SharedMemoryRegistry::unregister(Kind kind, const std::optional<std::string>& name,
                                      const std::string& owner) {
  check_allowed();
  std::vector<std::shared_ptr<const SharedMemoryRegion>> dropped;  // released outside the lock
  std::lock_guard lock(mu_);
  if (name) {
    // An unknown name is nothing to do, as in Triton (clients unregister "just in case").
    auto it = regions_.find(*name);
    if (it == regions_.end() || it->second->kind != kind) return;
    if (it->second->owner != owner)
      throw Forbidden("region '" + *name + "' belongs to another client");
    dropped.push_back(std::move(it->second));
    regions_.erase(it);
    return;
  }
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second->kind == kind && it->second->owner == owner) {
      dropped.push_back(std::move(it->second));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<SharedMemoryRegion> SharedMemoryRegistry::status(Kind kind,
                                                             const std::optional<std::string>& name,
                                                             const std::string& owner) const {
  check_allowed();
  std::lock_guard lock(mu_);
  std::vector<SharedMemoryRegion> out;
  for (const auto& [n, r] : regions_) {
    if (r->kind != kind || r->owner != owner || (name && n != *name)) continue;
    SharedMemoryRegion s = *r;
    s.mapping = nullptr;
    s.pinned = nullptr;
    s.device = nullptr;
    s.fd = -1;
    s.fd_closer = nullptr;
    out.push_back(std::move(s));
  }
  if (name && out.empty())
    throw NotFound(std::string("no ") + kind_name(kind) + " shared-memory region named '" + *name +
                   "'");
  return out;
}

std::shared_ptr<const SharedMemoryRegion> SharedMemoryRegistry::use(
    const SharedMemoryRef& ref, const std::string& owner, const std::string& where) const {
  check_allowed();
  std::shared_ptr<const SharedMemoryRegion> r;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(ref.region);
    if (it == regions_.end())
      throw NotFound(where + ".parameters.shared_memory_region: no region named '" + ref.region +
                     "' is registered");
    r = it->second;
  }
  if (r->owner != owner)
    throw Forbidden(where + ": region '" + ref.region + "' belongs to another client");
  if (ref.offset > r->byte_size || ref.byte_size > r->byte_size - ref.offset)
    throw InputError(where + ".parameters.shared_memory_offset",
                     "offset " + std::to_string(ref.offset) + " + byte_size " +
                         std::to_string(ref.byte_size) + " runs past region '" + ref.region +
                         "' (" + std::to_string(r->byte_size) + " bytes)");
  if (r->kind == Kind::system &&
      (!r->mapping->intact() || object_size(r->fd) < r->offset + ref.offset + ref.byte_size))
    throw InputError(where, "region '" + ref.region + "': its object '" + r->key + "' now holds " +
                                std::to_string(object_size(r->fd)) +
                                " bytes, fewer than the region (truncated after "
                                "it was registered); register it again");
  return r;
}

bool names_shared_memory(const InferRequest& request) {
  for (const Tensor& t : request.inputs)
    if (t.shared_memory) return true;
  for (const RequestedOutput& o : request.outputs)
    if (o.shared_memory) return true;
  return false;
}

void bind_shared_memory(InferRequest& request, const SharedMemoryRegistry* registry,
                        const std::string& owner) {
  auto check = [&] {
    if (!registry)
      throw Forbidden("shared memory is off: this front end takes no shared-memory regions");
    registry->check_allowed();
  };
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    Tensor& t = request.inputs[i];
    if (!t.shared_memory) continue;
    check();
    const std::string where = "inputs['" + t.name + "']";
    auto r = registry->use(*t.shared_memory, owner, where);
    if (r->kind == Kind::cuda) {
      t.view.reset();
      if (t.name == "x" && t.datatype == "FP32") {  // the features stay on the GPU (Tensor::device)
        t.device = r->device;
        continue;
      }
      t.raw.resize(t.shared_memory->byte_size);  // small inputs: the one copy, device to host
      r->device->read(t.shared_memory->offset, t.raw.data(), t.raw.size());
      continue;
    }
    t.view =
        std::string_view(r->mapping->data() + t.shared_memory->offset, t.shared_memory->byte_size);
    const std::uint64_t end = r->offset + t.shared_memory->offset + t.shared_memory->byte_size;
    request.held.emplace_back(where, std::make_shared<HeldRegion>(std::move(r), end));
  }
  for (std::size_t i = 0; i < request.outputs.size(); ++i) {
    RequestedOutput& o = request.outputs[i];
    if (!o.shared_memory) continue;
    check();
    const std::string where = "outputs[" + std::to_string(i) + "]";
    o.sink = std::make_shared<RegionSink>(registry->use(*o.shared_memory, owner, where),
                                          *o.shared_memory);
  }
}

}  // namespace dype::rt::daemon
