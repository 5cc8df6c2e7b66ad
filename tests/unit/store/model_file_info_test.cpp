// inspect_model_file and dump_tensor_f32 through the public API: metadata rendering (array
// previews, f32 shortest form), the tensor table, dump output and unknown-tensor errors.
#include "sluice/model_file_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "format/gguf/gguf_reader.h"
#include "format/gguf/gguf_writer.h"
#include "sluice/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class ModelFileInfo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_info_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "m.gguf").string();
    GgufWriter writer;
    writer.add_metadata("a.f32", MetaValue::scalar(1e-5f));
    writer.add_metadata("a.tokens", MetaValue::string_array({"x", "y", "z"}));
    writer.add_metadata("a.ids", MetaValue::array(std::vector<int32_t>{5, 6, 7}));
    const std::vector<float> values = {1, 2, 3, 4, 5, 6};
    writer.add_tensor("w", QType::F32, {3, 2},
                      {reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4});
    writer.write(path_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(ModelFileInfo, SummarizesMetadataAndTensors) {
  const ModelFileSummary summary = inspect_model_file(path_, 2);
  EXPECT_EQ(summary.format, "gguf");
  EXPECT_EQ(summary.version, 3u);
  EXPECT_EQ(summary.file_size, fs::file_size(path_));
  ASSERT_EQ(summary.metadata.size(), 3u);
  EXPECT_EQ(summary.metadata[0].value_json, "1e-05");
  EXPECT_EQ(summary.metadata[1].type, "array");
  EXPECT_EQ(summary.metadata[1].element_type, "string");
  EXPECT_EQ(summary.metadata[1].length, 3u);
  EXPECT_EQ(summary.metadata[1].value_json, R"(["x","y"])");
  EXPECT_EQ(summary.metadata[2].value_json, "[5,6]");
  ASSERT_EQ(summary.tensors.size(), 1u);
  EXPECT_EQ(summary.tensors[0].type, "F32");
  EXPECT_EQ(summary.tensors[0].shape, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(summary.tensors[0].bytes, 24u);
}

TEST_F(ModelFileInfo, DumpsFloatsAndNamesUnknownTensors) {
  const std::string out = (dir_ / "w.f32").string();
  dump_tensor_f32(path_, "w", out);
  std::ifstream in(out, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 24u);
  float third = 0;
  std::memcpy(&third, bytes.data() + 8, 4);
  EXPECT_EQ(third, 3.0f);
  try {
    dump_tensor_f32(path_, "missing", (dir_ / "x.f32").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such tensor (tensor: missing)"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir_ / "x.f32"));
}

TEST(ModelFileInfoTestdata, ReadsLlamaCppTinyModel) {
  const fs::path path = fs::path(SLUICE_TESTDATA_DIR) / "llamacpp-tiny" / "llama-dense-q8_0.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "test data absent: " << path;
  const ModelFile model = read_gguf(path.string());
  EXPECT_EQ(model.get_string("general.architecture"), "llama");
  const TensorInfo& embd = model.tensor("token_embd.weight");
  EXPECT_EQ(model.tensor_bytes(embd).size(), embd.n_bytes);
}

}  // namespace
}  // namespace sluice
