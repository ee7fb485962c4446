// The activation wire header (runtime/remote/activation.h): round trip, and every malformed header
// refused with a message that names the peer, the frame and what is wrong, before anything is
// sized from it.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "runtime/remote/activation.h"

using namespace dype::rt::remote;

namespace {

using Wire = std::array<std::byte, kActivationHeaderBytes>;

Wire encoded(const ActivationHeader& h) {
  Wire w{};
  encode_header(h, w);
  return w;
}

std::string refusal(std::span<const std::byte> wire, std::size_t payload_bytes) {
  try {
    decode_header(wire, payload_bytes, "10.0.0.2:7000");
  } catch (const ActivationError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(RemoteActivation, HeaderRoundTrips) {
  const ActivationHeader h{.rows = 4096, .cols = 256, .epoch = 7, .seq = 123456789012ULL,
                           .frame = 42, .window = 8};
  const ActivationHeader back = decode_header(encoded(h), 4096u * 256u * 4u, "p");
  EXPECT_EQ(back.rows, 4096u);
  EXPECT_EQ(back.cols, 256u);
  EXPECT_EQ(back.epoch, 7u);
  EXPECT_EQ(back.seq, 123456789012ULL);
  EXPECT_EQ(back.frame, 42u);
  EXPECT_EQ(back.window, 8u);
  EXPECT_EQ(back.dtype, Dtype::f32);
}

TEST(RemoteActivation, PayloadLengthMismatchIsRefusedWithThePreciseMessage) {
  const auto w = encoded({.rows = 4, .cols = 256, .seq = 9, .frame = 3});
  EXPECT_EQ(refusal(w, 4 * 256 * 4 - 4),
            "activation from 10.0.0.2:7000, frame 3 (seq 9): header says 4 x 256 float32 = 1024 "
            "values but the payload has 4092 bytes; refused");
  // Not a whole number of elements.
  EXPECT_EQ(refusal(w, 4 * 256 * 4 + 1),
            "activation from 10.0.0.2:7000, frame 3 (seq 9): header says 4 x 256 float32 = 1024 "
            "values but the payload has 4097 bytes; refused");
}

TEST(RemoteActivation, HugeDimensionsDoNotOverflowIntoAMatch) {
  // 2^32-1 squared times 4 overflows 64 bits; the check must not wrap around to a small number.
  const auto w = encoded({.rows = 0xFFFFFFFFu, .cols = 0xFFFFFFFFu, .frame = 1});
  EXPECT_NE(refusal(w, 4).find("header says 4294967295 x 4294967295 float32"), std::string::npos);
  const auto w2 = encoded({.rows = 0x40000000u, .cols = 0x40000000u, .frame = 1});  // x4 = 2^62
  EXPECT_NE(refusal(w2, 0).find("refused"), std::string::npos);
}

TEST(RemoteActivation, BadSizeMagicVersionAndDtypeAreRefused) {
  const auto good = encoded({.rows = 1, .cols = 1, .frame = 5});
  EXPECT_EQ(refusal(std::span(good).first(47), 4),
            "activation from 10.0.0.2:7000: header has 47 bytes, expected 48; refused");
  auto bad = good;
  bad[0] = std::byte{0};
  EXPECT_EQ(refusal(bad, 4),
            "activation from 10.0.0.2:7000: header does not start with the activation magic; refused");
  bad = good;
  const std::uint16_t v2 = 2;
  std::memcpy(bad.data() + 4, &v2, 2);
  EXPECT_EQ(refusal(bad, 4),
            "activation from 10.0.0.2:7000, frame 5: header version 2, this build reads version 1; refused");
  bad = good;
  const std::uint16_t f16 = 9;
  std::memcpy(bad.data() + 6, &f16, 2);
  EXPECT_EQ(refusal(bad, 4), "activation from 10.0.0.2:7000, frame 5: unknown dtype code 9; refused");
}

TEST(RemoteActivation, CopyOfChecksTheValueCount) {
  const std::vector<float> v(6, 1.0f);
  const Activation a = Activation::copy_of(1, 2, 2, 3, v);
  EXPECT_EQ(a.payload_bytes(), 24u);
  EXPECT_EQ(a.values()[5], 1.0f);
  EXPECT_THROW(Activation::copy_of(1, 2, 2, 2, v), std::invalid_argument);
}

TEST(RemoteActivation, ByteFramesCarryTheirLengthAndAreCheckedAsBytes) {
  const std::vector<std::byte> msg = {std::byte{3}, std::byte{1}, std::byte{0}, std::byte{7}, std::byte{9}};
  const Activation a = Activation::bytes_of(2, 17, msg);
  EXPECT_EQ(a.dtype(), Dtype::u8);
  EXPECT_EQ(a.rows(), 1u);
  EXPECT_EQ(a.cols(), 5u);
  EXPECT_EQ(a.payload_bytes(), 5u);
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), a.bytes().begin()));
  EXPECT_THROW((void)a.values(), std::logic_error);
  const Wire w = encoded(header_of(a, 0, 8));
  EXPECT_EQ(decode_header(w, 5, "p").dtype, Dtype::u8);
  EXPECT_EQ(refusal(w, 20),
            "activation from 10.0.0.2:7000, frame 0 (seq 17): header says 1 x 5 u8 = 5 values but the payload has 20 "
            "bytes; refused");
}
