// HostDirectory: where a multi-host system's other hosts are, from the file or their joins, and
// which joined hosts went quiet.
#include <gtest/gtest.h>

#include "hw/system_config.h"
#include "common/error.h"
#include "runtime/host_directory.h"

namespace dype::rt {
namespace {

hw::SystemConfig three_hosts() {
  hw::SystemConfig c;
  c.hosts = {{.name = "here"}, {.name = "a", .address = "10.0.0.2:7101"}, {.name = "b"}};
  return c;
}

TEST(RtHostDirectory, AddressesComeFromTheFileOrTheJoin) {
  HostDirectory d(three_hosts());
  ASSERT_EQ(d.hosts().size(), 2u) << "the coordinator itself is not listed";
  EXPECT_EQ(d.address("a"), "10.0.0.2:7101");
  EXPECT_EQ(d.address("b"), std::nullopt) << "b has not joined";
  EXPECT_FALSE(d.hosts()[1].joined);
  EXPECT_TRUE(d.join("b", "10.0.0.3:7102", 5.0)) << "a first join is news";
  EXPECT_EQ(d.address("b"), "10.0.0.3:7102");
  EXPECT_FALSE(d.join("b", "10.0.0.3:7102", 6.0)) << "a heartbeat is not";
  EXPECT_TRUE(d.join("b", "10.0.0.9:7102", 7.0)) << "a new address is";
  EXPECT_EQ(d.hosts()[1].joins, 3u);
  EXPECT_THROW(d.join("c", "x:1", 1.0), InputError);
  EXPECT_THROW(d.join("here", "x:1", 1.0), InputError) << "the coordinator does not join itself";
}

TEST(RtHostDirectory, OnlyJoinedHostsGoSilent) {
  HostDirectory d(three_hosts());
  EXPECT_TRUE(d.silent_since(100.0).empty()) << "a's address is from the file: no heartbeats expected";
  d.join("b", "10.0.0.3:7102", 10.0);
  EXPECT_TRUE(d.silent_since(9.0).empty());
  EXPECT_EQ(d.silent_since(11.0), std::vector<std::string>{"b"});
  d.join("b", "10.0.0.3:7102", 12.0);
  EXPECT_TRUE(d.silent_since(11.0).empty());
}

}  // namespace
}  // namespace dype::rt
