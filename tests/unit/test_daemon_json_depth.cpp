// The JSON nesting bound checked before parsing: brackets counted outside strings only, escapes
// honoured, and a body past the limit refused with the field and the limit named.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "runtime/daemon/kserve/json_depth.h"

namespace dype::rt::daemon {
namespace {

TEST(JsonDepth, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth(""), 0u);
  EXPECT_EQ(json_nesting_depth("1"), 0u);
  EXPECT_EQ(json_nesting_depth("[]"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,[2,{"b":[]}]],"c":{}})"), 5u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{"})"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[[","b":[1]})"), 2u);   // an escaped quote does not end the string
  EXPECT_EQ(json_nesting_depth(R"({"a":"\\","b":[[1]]})"), 3u);    // an escaped backslash does not escape the quote
  EXPECT_EQ(json_nesting_depth("]]]][[]"), 2u);                     // stray closers do not go below zero
}

TEST(JsonDepth, StopsCountingPastTheLimit) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(json_nesting_depth(deep, 64), 65u);
  EXPECT_EQ(json_nesting_depth(std::string(64, '[') + std::string(64, ']'), 64), 64u);
}

TEST(JsonDepth, RefusesBeyondTheLimitNamingFieldAndLimit) {
  EXPECT_NO_THROW(check_json_depth(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'), "request body"));
  try {
    check_json_depth(std::string(kMaxJsonDepth + 1, '{'), "request body");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request body"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dype::rt::daemon
