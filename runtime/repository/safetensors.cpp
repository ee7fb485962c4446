#include "runtime/repository/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include "common/error.h"

namespace dype::rt {

namespace {

using json = nlohmann::json;

// The reference implementation's cap on the header (safetensors' MAX_HEADER_SIZE).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 62;

struct DtypeInfo {
  const char* name;
  std::size_t bytes;
  TensorDtype dtype;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", 4, TensorDtype::f32}, {"F16", 2, TensorDtype::f16},      {"BF16", 2, TensorDtype::bf16},
    {"F64", 8, TensorDtype::other}, {"I64", 8, TensorDtype::other},  {"U64", 8, TensorDtype::other},
    {"I32", 4, TensorDtype::other}, {"U32", 4, TensorDtype::other},  {"I16", 2, TensorDtype::other},
    {"U16", 2, TensorDtype::other}, {"I8", 1, TensorDtype::other},   {"U8", 1, TensorDtype::other},
    {"BOOL", 1, TensorDtype::other}, {"F8_E5M2", 1, TensorDtype::other}, {"F8_E4M3", 1, TensorDtype::other},
};

const DtypeInfo* find_dtype(const std::string& s) {
  for (const DtypeInfo& d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A JSON number that is a whole, non-negative integer (not 2.0, not -1).
bool whole(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0); }

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // 127 - 15 = 112
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: shift the mantissa up until its leading one is the implicit bit.
    std::uint32_t e = 113;  // 127 - 15 + 1
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of a tensor's bytes as FP32 (memcpy, never a cast: the format does not align tensors).
float widen(const std::byte* bytes, TensorDtype dtype, std::size_t i) {
  if (dtype == TensorDtype::f32) {
    float f;
    std::memcpy(&f, bytes + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes + 2 * i, 2);
  if (dtype == TensorDtype::f16) return half_to_float(h);
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Capacity for n floats, asking for transparent huge pages before the first touch: a 100 MB
// weight then takes ~50 page faults instead of ~25,000 (the kernel's default here is madvise).
void reserve_huge(std::vector<float>& v, std::size_t n) {
  v.reserve(n);
  constexpr std::uintptr_t kHuge = 2u << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(v.data() + n)) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only
}

[[noreturn]] void not_finite(const std::string& where, float v, std::size_t index) {
  throw InputError(where, std::string(std::isnan(v) ? "NaN" : "Inf") + " at flat index " + std::to_string(index));
}

}  // namespace

const char* to_string(TensorDtype d) {
  switch (d) {
    case TensorDtype::f32: return "F32";
    case TensorDtype::f16: return "F16";
    case TensorDtype::bf16: return "BF16";
    case TensorDtype::other: return "other";
  }
  return "other";
}

std::int64_t TensorView::elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      tensors_(std::move(o.tensors_)),
      metadata_(std::move(o.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  if (path.empty()) throw InputError("safetensors file", "no path given");
  SafetensorsFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path, "not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw InputError(path, "file of " + std::to_string(size) + " bytes is shorter than the 8-byte header length");
  }
  // MAP_POPULATE: the kernel reads the file in ahead, instead of one page fault per 4 KiB touched.
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) throw InputError(path, std::string("cannot map: ") + std::strerror(errno));
  f.map_ = m;
  f.map_bytes_ = size;
  const auto* bytes = static_cast<const unsigned char*>(m);

  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeaderBytes) {
    throw InputError(path, "header length " + std::to_string(n) + " exceeds the format's limit of " +
                               std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > size - 8) {
    throw InputError(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                               std::to_string(size) + " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(n));
  if (text.empty() || text.front() != '{') throw InputError(path, "header is not a JSON object (must start with '{')");

  // nlohmann keeps the last of two equal keys: spot repeats of a top-level key while parsing.
  std::set<std::string> seen;
  std::string repeated;
  json header;
  try {
    header = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
          repeated.empty())
        repeated = parsed.get<std::string>();
      return true;
    });
  } catch (const json::exception& e) {
    throw InputError(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw InputError(path, "header is not a JSON object");
  if (!repeated.empty()) throw InputError(path + ": tensor '" + repeated + "'", "named twice in the header");

  const std::uint64_t data_bytes = size - 8 - n;
  const std::byte* data = reinterpret_cast<const std::byte*>(bytes + 8 + n);
  for (const auto& [name, entry] : header.items()) {
    const std::string where = path + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path + ": __metadata__", "must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw InputError(path + ": __metadata__." + k, "must be a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) throw InputError(where, "entry must be an object with dtype, shape and data_offsets");
    for (const auto& [k, v] : entry.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") throw InputError(where, "unknown key '" + k + "'");
    }
    for (const char* k : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(k)) throw InputError(where, std::string("missing '") + k + "'");
    }
    TensorView t;
    t.name = name;
    if (!entry["dtype"].is_string()) throw InputError(where, "dtype must be a string");
    t.dtype_name = entry["dtype"].get<std::string>();
    const DtypeInfo* d = find_dtype(t.dtype_name);
    if (!d) {
      std::string known;
      for (const DtypeInfo& k : kDtypes) known += (known.empty() ? "" : ", ") + std::string(k.name);
      throw InputError(where, "unknown dtype '" + t.dtype_name + "' (the format's: " + known + ")");
    }
    t.dtype = d->dtype;
    const json& shape = entry["shape"];
    if (!shape.is_array()) throw InputError(where, "shape must be a list of whole numbers");
    std::int64_t elements = 1;
    for (const json& dim : shape) {
      if (!whole(dim)) throw InputError(where, "shape must be a list of whole numbers >= 0, has " + dim.dump());
      const std::uint64_t v = dim.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(kMaxElements) ||
          (elements > 0 && static_cast<std::int64_t>(v) > kMaxElements / elements)) {
        throw InputError(where, "shape " + shape.dump() + " has more elements than can be addressed");
      }
      t.shape.push_back(static_cast<std::int64_t>(v));
      elements *= static_cast<std::int64_t>(v);
    }
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !whole(off[0]) || !whole(off[1])) {
      throw InputError(where, "data_offsets must be two whole numbers [begin, end], has " + off.dump());
    }
    const std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    if (begin > end) throw InputError(where, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") end before they begin");
    if (end > data_bytes) {
      throw InputError(where, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                  ") run past the end of the data (" + std::to_string(data_bytes) + " bytes)");
    }
    const std::uint64_t need = static_cast<std::uint64_t>(elements) * d->bytes;  // elements <= 2^62 / 8 checked below
    if (static_cast<std::uint64_t>(elements) > data_bytes || end - begin != need) {
      throw InputError(where, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") hold " +
                                  std::to_string(end - begin) + " bytes, " + t.dtype_name + " " + shape_text(t.shape) +
                                  " needs " + (static_cast<std::uint64_t>(elements) > data_bytes ? "more than the file has" : std::to_string(need)));
    }
    t.bytes = std::span<const std::byte>(data + begin, static_cast<std::size_t>(end - begin));
    f.tensors_.emplace(name, std::move(t));
  }

  // The tensors tile the data exactly: in offset order each begins where the previous ended.
  std::vector<const TensorView*> order;
  for (const auto& [name, t] : f.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [&](const TensorView* a, const TensorView* b) {
    return std::make_pair(a->bytes.data(), a->bytes.size()) < std::make_pair(b->bytes.data(), b->bytes.size());
  });
  std::uint64_t at = 0;
  const TensorView* prev = nullptr;
  for (const TensorView* t : order) {
    const auto begin = static_cast<std::uint64_t>(t->bytes.data() - data);
    if (begin < at) {
      throw InputError(path + ": tensor '" + t->name + "'", "data_offsets [" + std::to_string(begin) + ", " +
                                                                std::to_string(begin + t->bytes.size()) + ") overlap tensor '" +
                                                                prev->name + "'");
    }
    if (begin > at) {
      throw InputError(path, "bytes [" + std::to_string(at) + ", " + std::to_string(begin) +
                                 ") of the data belong to no tensor (the format has no gaps)");
    }
    at = begin + t->bytes.size();
    prev = t;
  }
  if (at != data_bytes) {
    throw InputError(path, "bytes [" + std::to_string(at) + ", " + std::to_string(data_bytes) +
                               ") at the end of the data belong to no tensor");
  }
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string some;
    int listed = 0;
    for (const auto& [n, t] : tensors_) {
      if (listed++ == 6) {
        some += ", ...";
        break;
      }
      some += (some.empty() ? "" : ", ") + n;
    }
    throw InputError(path_, "no tensor '" + name + "'" + (some.empty() ? " (the file holds none)" : " (it holds " + some + ")"));
  }
  return it->second;
}

std::vector<float> SafetensorsFile::to_f32(const std::string& name,
                                           std::optional<std::vector<std::int64_t>> expect_shape) const {
  const TensorView& t = tensor(name);
  const std::string where = path_ + ": tensor '" + name + "'";
  if (t.dtype == TensorDtype::other) {
    throw InputError(where, "dtype " + t.dtype_name + " cannot be read as weights (F32, F16 or BF16)");
  }
  if (expect_shape && *expect_shape != t.shape) {
    throw InputError(where, "shape " + shape_text(t.shape) + ", expected " + shape_text(*expect_shape));
  }
  const auto n = static_cast<std::size_t>(t.elements());
  std::vector<float> out;
  reserve_huge(out, n);
  out.resize(n);
  if (t.dtype == TensorDtype::f32) {
    if (n > 0) std::memcpy(out.data(), t.bytes.data(), n * 4);  // an empty vector's data() may be null
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = widen(t.bytes.data(), t.dtype, i);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) not_finite(where, out[i], i);
  }
  return out;
}

std::vector<float> SafetensorsFile::to_f32_transposed(const std::string& name, std::int64_t rows, std::int64_t cols) const {
  const TensorView& t = tensor(name);
  const std::string where = path_ + ": tensor '" + name + "'";
  if (t.dtype == TensorDtype::other) {
    throw InputError(where, "dtype " + t.dtype_name + " cannot be read as weights (F32, F16 or BF16)");
  }
  if (t.shape != std::vector<std::int64_t>{rows, cols}) {
    throw InputError(where, "shape " + shape_text(t.shape) + ", expected " + shape_text({rows, cols}));
  }
  std::vector<float> out;
  reserve_huge(out, static_cast<std::size_t>(rows * cols));
  out.resize(static_cast<std::size_t>(rows * cols));
  // Tiles keep both the reads and the strided writes in cache; the non-finite value with the
  // lowest flat index is reported, as to_f32 would.
  constexpr std::int64_t kTile = 64;
  std::atomic<std::size_t> bad{SIZE_MAX};
  auto tiles = [&](auto dtype) {  // dtype as a compile-time constant: a plain loop per dtype
    tbb::parallel_for(tbb::blocked_range2d<std::int64_t>(0, rows, kTile, 0, cols, kTile), [&](const auto& r) {
      bool finite = true;
      for (std::int64_t i = r.rows().begin(); i < r.rows().end(); ++i) {
        for (std::int64_t j = r.cols().begin(); j < r.cols().end(); ++j) {
          const float v = widen(t.bytes.data(), decltype(dtype)::value, static_cast<std::size_t>(i * cols + j));
          finite &= std::isfinite(v);
          out[static_cast<std::size_t>(j * rows + i)] = v;
        }
      }
      if (finite) return;
      for (std::int64_t i = r.rows().begin(); i < r.rows().end(); ++i) {
        for (std::int64_t j = r.cols().begin(); j < r.cols().end(); ++j) {
          const auto flat = static_cast<std::size_t>(i * cols + j);
          if (std::isfinite(out[static_cast<std::size_t>(j * rows + i)])) continue;
          std::size_t seen = bad.load();
          while (flat < seen && !bad.compare_exchange_weak(seen, flat)) {
          }
        }
      }
    });
  };
  switch (t.dtype) {
    case TensorDtype::f32: tiles(std::integral_constant<TensorDtype, TensorDtype::f32>{}); break;
    case TensorDtype::f16: tiles(std::integral_constant<TensorDtype, TensorDtype::f16>{}); break;
    default: tiles(std::integral_constant<TensorDtype, TensorDtype::bf16>{}); break;
  }
  if (bad.load() != SIZE_MAX) not_finite(where, widen(t.bytes.data(), t.dtype, bad.load()), bad.load());
  return out;
}

}  // namespace dype::rt
