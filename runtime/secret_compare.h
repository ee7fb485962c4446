#pragma once
// Comparing a secret someone presented with the one expected (tokens), in time that depends only on
// the expected secret's length, so the time taken does not reveal a matching prefix.
#include <cstddef>
#include <string_view>

namespace dype::rt {

inline bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>((i < given.size() ? given[i] : '\0') ^ expected[i]);
  return diff == 0;
}

}  // namespace dype::rt
