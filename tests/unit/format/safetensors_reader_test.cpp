// Safetensors reader: single files, sharded snapshot directories, and one malformed header per
// validation rule with the message it must produce.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "format/model_file_open.h"
#include "format/safetensors/safetensors_reader.h"
#include "sluice/error.h"
#include "unit/format/byte_builder.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using test::ByteBuilder;

std::vector<uint8_t> safetensors_file(const std::string& header, size_t data_bytes) {
  ByteBuilder file;
  file.put<uint64_t>(header.size()).raw(header).zeros(data_bytes);
  return file.bytes;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse_safetensors(bytes, "m.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& header, size_t data_bytes, const std::string& expected) {
  const std::string message = error_of(safetensors_file(header, data_bytes));
  EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message;
  EXPECT_EQ(message.rfind("safetensors: m.safetensors: ", 0), 0u) << "message: " << message;
}

TEST(SafetensorsReader, ParsesTensorsAndMetadata) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},)"
      R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"s":{"dtype":"U8","shape":[],"data_offsets":[28,29]}})";
  const auto bytes = safetensors_file(header, 29);
  const ModelFile model = parse_safetensors(bytes, "m.safetensors");
  EXPECT_EQ(model.get_string("format"), "pt");
  ASSERT_EQ(model.tensors().size(), 3u);
  EXPECT_EQ(model.tensors()[0].name, "a");  // file order is data order
  const TensorInfo& b = model.tensor("b");
  EXPECT_EQ(b.type, QType::BF16);
  EXPECT_EQ(b.n_dims, 2u);
  EXPECT_EQ(b.ne[0], 3u);  // row-major [2, 3] reversed: fastest first
  EXPECT_EQ(b.ne[1], 2u);
  EXPECT_EQ(b.offset, 8 + header.size() + 16);
  EXPECT_EQ(b.n_bytes, 12u);
  EXPECT_EQ(model.tensor("s").n_dims, 0u);
  EXPECT_EQ(model.tensor("s").n_elements, 1u);
}

TEST(SafetensorsReader, RefusesBadHeaders) {
  EXPECT_NE(error_of({1, 2, 3}).find("file too small for a safetensors header (size: 3)"),
            std::string::npos);
  ByteBuilder huge;
  huge.put<uint64_t>(uint64_t{200} << 20);
  EXPECT_NE(error_of(huge.bytes).find("header length exceeds 100 MiB"), std::string::npos);
  ByteBuilder past;
  past.put<uint64_t>(100).raw("{}");
  EXPECT_NE(error_of(past.bytes).find("header length exceeds the file (header_length: 100)"),
            std::string::npos);
  expect_error("[1]", 0, "header does not start with '{'");
  expect_error("{\"a\":", 0, "header is not valid JSON");
  expect_error(R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4,
               "header nests deeper");
  expect_error(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "duplicate tensor name (tensor: a)");
  expect_error(R"({"__metadata__":{"k":1}})", 0, "__metadata__ value is not a string (key: k)");
}

TEST(SafetensorsReader, RefusesBadTensorEntries) {
  expect_error(R"({"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", 2,
               "unsupported dtype (a: U16)");
  expect_error(R"({"a":{"shape":[1],"data_offsets":[0,2]}})", 2,
               "tensor has no dtype string (tensor: a)");
  expect_error(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", 4,
               "tensor has more than 4 dimensions (a: 5)");
  expect_error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
               "shape must be a non-negative integer (a: -1)");
  expect_error(
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
      "tensor byte length does not match shape and dtype (a: 8 bytes for 3 elements of 4)");
  expect_error(R"({"a":{"dtype":"F64","shape":[2147483648,2147483648],"data_offsets":[0,8]}})", 8,
               "tensor byte length does not match shape and dtype");
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4,
               "tensor needs data_offsets [begin, end] (tensor: a)");
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8,
               "end before they begin (a: [8, 4])");
}

TEST(SafetensorsReader, RefusesBadTiling) {
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
               "gap in the data before tensor (a: begins at 4, expected 0)");
  expect_error(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "tensor data overlaps the previous tensor (b: begins at 4, expected 8)");
  expect_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4,
               "tensor data extends past the end of the file (a: end 8 > 4)");
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8,
               "data section is not fully covered by tensors (data_bytes: 8, covered: 4)");
}

class SnapshotDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_st_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST_F(SnapshotDir, ReadsShardedIndex) {
  write(
      "model-00001-of-00002.safetensors",
      safetensors_file(
          R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
          4));
  write("model-00002-of-00002.safetensors",
        safetensors_file(R"({"y":{"dtype":"I32","shape":[1,2],"data_offsets":[0,8]}})", 8));
  write(
      "model.safetensors.index.json",
      R"({"metadata":{"total_size":12},"weight_map":{"y":"model-00002-of-00002.safetensors","x":"model-00001-of-00002.safetensors"}})");
  const ModelFile model = read_model_file(dir_.string());
  EXPECT_EQ(model.format(), FileFormat::safetensors);
  ASSERT_EQ(model.sources().size(), 2u);
  ASSERT_EQ(model.tensors().size(), 2u);
  EXPECT_EQ(model.tensors()[0].name, "x");
  EXPECT_EQ(model.tensor("y").file_index, 1u);
  EXPECT_EQ(model.get_u64("total_size"), 12u);
  EXPECT_EQ(model.get_string("format"), "pt");
  EXPECT_EQ(model.tensor_bytes(model.tensor("y")).size(), 8u);
}

TEST_F(SnapshotDir, RefusesBrokenIndex) {
  write("a.safetensors",
        safetensors_file(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4));
  write("model.safetensors.index.json",
        R"({"weight_map":{"x":"a.safetensors","z":"a.safetensors"}})");
  try {
    read_safetensors(dir_.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "tensor listed in weight_map is missing from its shard (z: a.safetensors)"),
              std::string::npos)
        << e.what();
  }
  write("model.safetensors.index.json", R"({"weight_map":{"x":"missing.safetensors"}})");
  EXPECT_THROW(read_safetensors(dir_.string()), Error);
  write("model.safetensors.index.json", R"({"weight_map":{"x":"../a.safetensors"}})");
  EXPECT_THROW(read_safetensors(dir_.string()), Error);
}

TEST_F(SnapshotDir, ReadsSingleFileDirectoryAndRefusesEmptyOne) {
  EXPECT_THROW(read_safetensors(dir_.string()), Error);
  write("model.safetensors",
        safetensors_file(R"({"x":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", 3));
  const ModelFile model = read_safetensors(dir_.string());
  EXPECT_EQ(model.tensor("x").type, QType::BOOL);
}

}  // namespace
}  // namespace sluice
