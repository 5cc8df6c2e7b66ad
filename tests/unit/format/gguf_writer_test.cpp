// GGUF writer round trip: every metadata type (arrays and nested arrays included) and tensors
// of several types and alignments come back from the reader exactly; output is atomic.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>

#include "format/gguf/gguf_reader.h"
#include "format/gguf/gguf_writer.h"
#include "sluice/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("sluice_gguf_test_" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  size_t entries() const {
    return std::distance(fs::directory_iterator(path_), fs::directory_iterator());
  }

 private:
  fs::path path_;
};

std::vector<std::pair<std::string, MetaValue>> every_metadata_type() {
  return {
      {"u8", MetaValue::scalar<uint8_t>(200)},
      {"i8", MetaValue::scalar<int8_t>(-100)},
      {"u16", MetaValue::scalar<uint16_t>(60000)},
      {"i16", MetaValue::scalar<int16_t>(-30000)},
      {"u32", MetaValue::scalar<uint32_t>(4000000000u)},
      {"i32", MetaValue::scalar<int32_t>(-2000000000)},
      {"u64", MetaValue::scalar<uint64_t>(~uint64_t{0})},
      {"i64", MetaValue::scalar<int64_t>(INT64_MIN)},
      {"f32", MetaValue::scalar(1.5f)},
      {"f64", MetaValue::scalar(-2.25)},
      {"bool", MetaValue::scalar(true)},
      {"string", MetaValue::string("héllo\n")},
      {"empty_string", MetaValue::string("")},
      {"a_u8", MetaValue::array(std::vector<uint8_t>{1, 2, 255})},
      {"a_i8", MetaValue::array(std::vector<int8_t>{-1, 2})},
      {"a_u16", MetaValue::array(std::vector<uint16_t>{1, 65535})},
      {"a_i16", MetaValue::array(std::vector<int16_t>{-1, 32767})},
      {"a_u32", MetaValue::array(std::vector<uint32_t>{7})},
      {"a_i32", MetaValue::array(std::vector<int32_t>{-7, 8, 9})},
      {"a_u64", MetaValue::array(std::vector<uint64_t>{1, ~uint64_t{0}})},
      {"a_i64", MetaValue::array(std::vector<int64_t>{INT64_MIN, 0})},
      {"a_f32", MetaValue::array(std::vector<float>{0.5f, -1e30f})},
      {"a_f64", MetaValue::array(std::vector<double>{1e300})},
      {"a_bool", MetaValue::array(std::vector<bool>{true, false, true})},
      {"a_string", MetaValue::string_array({"a", "", "ü"})},
      {"a_empty", MetaValue::array(std::vector<int32_t>{})},
      {"a_nested", MetaValue::array_of_arrays({MetaValue::array(std::vector<int32_t>{1, 2}),
                                               MetaValue::string_array({"x"}),
                                               MetaValue::array_of_arrays({})})},
  };
}

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  std::iota(bytes.begin(), bytes.end(), uint8_t{1});
  return bytes;
}

TEST(GgufWriter, RoundTripsEveryMetadataTypeAndTensors) {
  TempDir dir;
  for (uint32_t alignment : {32u, 64u, 1u}) {
    GgufWriter writer;
    if (alignment != 32) writer.set_alignment(alignment);
    for (const auto& [key, value] : every_metadata_type()) writer.add_metadata(key, value);
    const auto f32 = pattern(4 * 3 * 2), q4 = pattern(18 * 4), q8 = pattern(34);
    writer.add_tensor("a.f32", QType::F32, {3, 2}, f32);
    writer.add_tensor("b.q4_0", QType::Q4_0, {64, 2}, q4);
    writer.add_tensor("c.q8_0", QType::Q8_0, {32}, q8);
    const std::string path = dir.file("rt.gguf");
    writer.write(path);

    const ModelFile model = read_gguf(path);
    EXPECT_EQ(model.version, 3u);
    EXPECT_EQ(model.alignment, alignment);
    size_t index = 0;
    for (const auto& [key, value] : every_metadata_type()) {
      const MetaEntry& entry = model.metadata()[index++ + (alignment != 32 ? 1 : 0)];
      EXPECT_EQ(entry.key, key);
      EXPECT_TRUE(entry.value == value) << key;
    }
    ASSERT_EQ(model.tensors().size(), 3u);
    EXPECT_EQ(model.tensors()[1].name, "b.q4_0");
    EXPECT_EQ(model.tensors()[1].ne[0], 64u);
    EXPECT_EQ(model.tensors()[1].ne[1], 2u);
    for (const auto& tensor : model.tensors())
      EXPECT_EQ((tensor.offset - model.data_offset) % alignment, 0u);
    auto span_eq = [](std::span<const uint8_t> a, const std::vector<uint8_t>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end());
    };
    EXPECT_TRUE(span_eq(model.tensor_bytes(model.tensor("a.f32")), f32));
    EXPECT_TRUE(span_eq(model.tensor_bytes(model.tensor("b.q4_0")), q4));
    EXPECT_TRUE(span_eq(model.tensor_bytes(model.tensor("c.q8_0")), q8));
    EXPECT_EQ(model.get_array("a_string").strings()->at(2), "ü");
    EXPECT_EQ(model.get_array("a_bool").array_as<bool>()->at(1), false);
  }
  EXPECT_EQ(dir.entries(), 1u);  // no temporary files left behind
}

TEST(GgufWriter, RefusesBadInput) {
  GgufWriter writer;
  writer.add_metadata("k", MetaValue::scalar<uint32_t>(1));
  EXPECT_THROW(writer.add_metadata("k", MetaValue::scalar<uint32_t>(2)), Error);
  EXPECT_THROW(writer.add_metadata("general.alignment", MetaValue::scalar<int32_t>(64)), Error);
  EXPECT_THROW(writer.set_alignment(24), Error);
  const auto bytes = pattern(18);
  EXPECT_THROW(writer.add_tensor("t", QType::Q4_0, {16}, bytes), Error);  // not a whole block
  EXPECT_THROW(writer.add_tensor("t", QType::Q4_0, {64}, bytes), Error);  // wrong byte count
  EXPECT_THROW(writer.add_tensor("t", QType::U8, {18}, bytes), Error);    // not a GGUF type
  writer.add_tensor("t", QType::Q4_0, {32}, bytes);
  EXPECT_THROW(writer.add_tensor("t", QType::Q4_0, {32}, bytes), Error);
}

TEST(GgufWriter, StreamsProducedTensorsAndChecksTheirSize) {
  TempDir dir;
  const auto bytes = pattern(36);
  GgufWriter writer;
  writer.add_tensor("a", QType::Q4_0, {64}, [&](const GgufWriter::Emit& emit) {
    emit(std::span(bytes).first(5));  // pieces of any size
    emit(std::span(bytes).subspan(5));
  });
  writer.write(dir.file("ok.gguf"));
  const ModelFile model = read_gguf(dir.file("ok.gguf"));
  const auto stored = model.tensor_bytes(model.tensor("a"));
  EXPECT_TRUE(std::equal(stored.begin(), stored.end(), bytes.begin(), bytes.end()));

  for (size_t size : {35, 37}) {  // short and long producers fail and leave no file
    const auto wrong = pattern(size);
    GgufWriter bad;
    bad.add_tensor("a", QType::Q4_0, {64}, [&](const GgufWriter::Emit& emit) { emit(wrong); });
    EXPECT_THROW(bad.write(dir.file("bad.gguf")), Error);
    EXPECT_FALSE(fs::exists(dir.file("bad.gguf")));
  }
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(GgufWriter, FailedWriteLeavesNothing) {
  GgufWriter writer;
  EXPECT_THROW(writer.write("/nonexistent-dir/x.gguf"), Error);
}

}  // namespace
}  // namespace sluice
