#pragma once
// Shared by the device tests (test_device_conformance, test_gpu_device, test_hip_device): moving
// host vectors on and off a hw::Device, and seeded random inputs.
#include <cstddef>
#include <random>
#include <span>
#include <vector>

#include "hw/device.h"

namespace dype::hw::testing {

template <typename T>
std::span<const std::byte> bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

template <typename T>
BufferPtr upload(Device& d, const std::vector<T>& v) {
  auto b = d.allocate(v.size() * sizeof(T));
  d.copy_from_host(*b, bytes(v));
  return b;
}

inline std::vector<float> download(Device& d, const Buffer& b) {
  std::vector<float> v(b.size_bytes() / sizeof(float));
  d.copy_to_host(b, std::as_writable_bytes(std::span<float>(v)));
  return v;
}

// n floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace dype::hw::testing
