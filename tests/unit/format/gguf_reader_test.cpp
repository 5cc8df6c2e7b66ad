// GGUF reader validation: each rule gets a hand-built file that breaks exactly it, and the test
// checks the one-line message names the problem and the offending field or value.
#include <gtest/gtest.h>

#include <string>

#include "format/gguf/gguf_reader.h"
#include "sluice/error.h"
#include "unit/format/byte_builder.h"

namespace sluice {
namespace {

using test::ByteBuilder;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint32_t kU32 = 4;
constexpr uint32_t kI32 = 5;
constexpr uint32_t kString = 8;
constexpr uint32_t kArray = 9;

// The message parse_gguf throws for `bytes`, or "" when it accepts them.
std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse_gguf(bytes, "t.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const ByteBuilder& file, const std::string& expected) {
  const std::string message = error_of(file.bytes);
  EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message;
  EXPECT_EQ(message.rfind("gguf: t.gguf: ", 0), 0u) << "message: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

// A valid file: one u32 key and one F32 [4, 2] tensor at data offset 0.
ByteBuilder valid_file() {
  ByteBuilder file;
  file.gguf_header(3, 1, 1).str("general.x").put<uint32_t>(kU32).put<uint32_t>(7);
  file.tensor_info("w", {4, 2}, kF32, 0).pad_to(32).zeros(32);
  return file;
}

TEST(GgufReader, AcceptsMinimalFile) {
  const auto file = valid_file();
  const ModelFile model = parse_gguf(file.bytes, "t.gguf");
  EXPECT_EQ(model.version, 3u);
  EXPECT_EQ(model.get_u32("general.x"), 7u);
  ASSERT_EQ(model.tensors().size(), 1u);
  const TensorInfo& w = model.tensor("w");
  EXPECT_EQ(w.n_dims, 2u);
  EXPECT_EQ(w.ne[0], 4u);
  EXPECT_EQ(w.ne[1], 2u);
  EXPECT_EQ(w.n_elements, 8u);
  EXPECT_EQ(w.n_bytes, 32u);
  EXPECT_EQ(w.offset, model.data_offset);
  EXPECT_EQ(model.data_offset % 32, 0u);
}

TEST(GgufReader, AcceptsVersion2AndZeroSizedDims) {
  ByteBuilder file;
  file.gguf_header(2, 1, 0).tensor_info("empty", {0, 3}, kF32, 0).pad_to(32);
  const ModelFile model = parse_gguf(file.bytes, "t.gguf");
  EXPECT_EQ(model.version, 2u);
  EXPECT_EQ(model.tensor("empty").n_bytes, 0u);
}

TEST(GgufReader, RefusesBadMagic) {
  ByteBuilder file;
  file.raw("GGML").put<uint32_t>(3);
  expect_error(file, "bad magic (magic: GGML)");
  expect_error(ByteBuilder{}, "bad magic");
}

TEST(GgufReader, RefusesVersions) {
  ByteBuilder v1, v4, big_endian, zero;
  v1.gguf_header(1, 0, 0);
  v4.gguf_header(4, 0, 0);
  big_endian.gguf_header(0x03000000, 0, 0);
  zero.gguf_header(0, 0, 0);
  expect_error(v1, "GGUF v1 is not supported");
  expect_error(v4, "unsupported GGUF version (version: 4)");
  expect_error(big_endian, "big-endian GGUF files are not supported (version: 0x03000000)");
  expect_error(zero, "unsupported GGUF version (version: 0)");
}

TEST(GgufReader, RefusesTruncatedHeader) {
  ByteBuilder file;
  file.raw("GGUF").put<uint32_t>(3).put<uint32_t>(0);
  expect_error(file, "file ends inside the header (tensor count: offset 8)");
}

TEST(GgufReader, BoundsCountsByFileSize) {
  ByteBuilder tensors, kvs;
  tensors.gguf_header(3, 1000, 0).zeros(64);
  kvs.gguf_header(3, 0, uint64_t{1} << 60);
  expect_error(tensors, "tensor count exceeds what the file can hold (tensor_count: 1000)");
  expect_error(kvs,
               "metadata count exceeds what the file can hold (kv_count: 1152921504606846976)");
}

TEST(GgufReader, BoundsStringAndArrayLengths) {
  ByteBuilder long_string, long_array;
  long_string.gguf_header(3, 0, 1).str("k").put<uint32_t>(kString).put<uint64_t>(1000).raw("abc");
  long_array.gguf_header(3, 0, 1).str("k").put<uint32_t>(kArray).put<uint32_t>(kI32);
  long_array.put<uint64_t>(uint64_t{1} << 62).zeros(16);
  expect_error(long_string, "string length exceeds the remaining file (k: 1000)");
  expect_error(long_array, "array length exceeds the remaining file (k: 4611686018427387904)");
}

TEST(GgufReader, ChecksKeys) {
  ByteBuilder empty, bad_utf8, duplicate;
  empty.gguf_header(3, 0, 1).str("").put<uint32_t>(kU32).put<uint32_t>(1);
  bad_utf8.gguf_header(3, 0, 1).str("a\xC3(").put<uint32_t>(kU32).put<uint32_t>(1);
  duplicate.gguf_header(3, 0, 2);
  for (int i = 0; i < 2; ++i) duplicate.str("dup").put<uint32_t>(kU32).put<uint32_t>(1);
  expect_error(empty, "metadata key is empty (index: 0)");
  expect_error(bad_utf8, "metadata key is not valid UTF-8 (index 0: a\\xC3()");
  expect_error(duplicate, "duplicate metadata key (key: dup)");
}

TEST(GgufReader, ChecksValueTypes) {
  ByteBuilder unknown, unknown_element;
  unknown.gguf_header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(1);
  unknown_element.gguf_header(3, 0, 1).str("k").put<uint32_t>(kArray).put<uint32_t>(77);
  unknown_element.put<uint64_t>(0);
  expect_error(unknown, "unknown metadata value type (k: 13)");
  expect_error(unknown_element, "unknown metadata value type (k: 77)");
}

TEST(GgufReader, CapsArrayNesting) {
  ByteBuilder file;
  file.gguf_header(3, 0, 1).str("k").put<uint32_t>(kArray);
  for (int depth = 0; depth < 9; ++depth) file.put<uint32_t>(kArray).put<uint64_t>(1);
  file.zeros(64);
  expect_error(file, "arrays nested too deep (k: 9)");
}

TEST(GgufReader, ChecksAlignment) {
  ByteBuilder wrong_type, not_power;
  wrong_type.gguf_header(3, 0, 1).str("general.alignment").put<uint32_t>(kI32).put<int32_t>(32);
  not_power.gguf_header(3, 0, 1).str("general.alignment").put<uint32_t>(kU32).put<uint32_t>(48);
  expect_error(wrong_type, "alignment must be a u32 (general.alignment: i32)");
  expect_error(not_power, "alignment is not a nonzero power of two (general.alignment: 48)");
}

TEST(GgufReader, ChecksTensorShapes) {
  ByteBuilder no_dims, five_dims, overflow, negative;
  no_dims.gguf_header(3, 1, 0).tensor_info("t", {}, kF32, 0).zeros(64);
  five_dims.gguf_header(3, 1, 0).tensor_info("t", {1, 1, 1, 1, 1}, kF32, 0).zeros(64);
  overflow.gguf_header(3, 1, 0).tensor_info("t", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0);
  overflow.zeros(64);
  negative.gguf_header(3, 1, 0).tensor_info("t", {~uint64_t{0}}, kF32, 0).zeros(64);
  expect_error(no_dims, "tensor has an invalid number of dimensions (t: 0)");
  expect_error(five_dims, "tensor has an invalid number of dimensions (t: 5)");
  expect_error(overflow, "tensor element count overflows (t: [4294967296, 4294967296])");
  expect_error(negative, "tensor dimension out of range (t: ne[0] = 18446744073709551615)");
}

TEST(GgufReader, ChecksTensorTypes) {
  ByteBuilder removed, unknown, safetensors_only, block;
  removed.gguf_header(3, 1, 0).tensor_info("t", {32}, 4, 0).zeros(64);
  unknown.gguf_header(3, 1, 0).tensor_info("t", {32}, 99, 0).zeros(64);
  safetensors_only.gguf_header(3, 1, 0).tensor_info("t", {32}, 1000, 0).zeros(64);
  block.gguf_header(3, 1, 0).tensor_info("t", {48}, kQ4_0, 0).zeros(64);
  expect_error(removed, "unknown tensor type (t: 4)");
  expect_error(unknown, "unknown tensor type (t: 99)");
  expect_error(safetensors_only, "unknown tensor type (t: 1000)");
  expect_error(block,
               "tensor row length is not a multiple of the Q4_0 block size 32 (t: ne[0] = 48)");
}

TEST(GgufReader, ChecksTensorPlacement) {
  ByteBuilder unaligned, past_end, overlap;
  unaligned.gguf_header(3, 1, 0).tensor_info("t", {4}, kF32, 16).pad_to(32).zeros(64);
  past_end.gguf_header(3, 1, 0).tensor_info("t", {64}, kF32, 0).pad_to(32).zeros(64);
  overlap.gguf_header(3, 2, 0).tensor_info("a", {16}, kF32, 0).tensor_info("b", {8}, kF32, 32);
  overlap.pad_to(32).zeros(64);
  expect_error(unaligned, "tensor offset is not a multiple of the alignment 32 (t: 16)");
  expect_error(past_end, "tensor data extends past the end of the file (t: offset 0 + 256 bytes");
  expect_error(overlap, "tensor data overlaps another tensor (b: overlaps a)");
}

TEST(GgufReader, ChecksTensorNames) {
  ByteBuilder duplicate, bad_utf8, empty;
  duplicate.gguf_header(3, 2, 0).tensor_info("t", {4}, kF32, 0).tensor_info("t", {4}, kF32, 32);
  duplicate.pad_to(32).zeros(64);
  bad_utf8.gguf_header(3, 1, 0).tensor_info("\xFF", {4}, kF32, 0).pad_to(32).zeros(32);
  empty.gguf_header(3, 1, 0).tensor_info("", {4}, kF32, 0).pad_to(32).zeros(32);
  expect_error(duplicate, "duplicate tensor name (tensor: t)");
  expect_error(bad_utf8, "tensor name is not valid UTF-8 (index 0: \\xFF)");
  expect_error(empty, "tensor name is empty (index: 0)");
}

TEST(GgufReader, TypedGettersNameKeyAndTypes) {
  const auto file = valid_file();
  const ModelFile model = parse_gguf(file.bytes, "t.gguf");
  try {
    model.get_string("general.x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "gguf: t.gguf: metadata key has type u32, expected string (key: general.x)");
  }
  EXPECT_THROW(model.get_u32("missing"), Error);
  EXPECT_EQ(model.find("missing"), nullptr);
  EXPECT_THROW(model.tensor("nope"), Error);
}

TEST(GgufReader, EveryTruncationFailsCleanly) {
  const auto file = valid_file();
  for (size_t size = 0; size < file.bytes.size(); ++size) {
    std::vector<uint8_t> prefix(file.bytes.begin(), file.bytes.begin() + static_cast<long>(size));
    EXPECT_NE(error_of(prefix), "") << "accepted a file cut at " << size;
  }
}

}  // namespace
}  // namespace sluice
