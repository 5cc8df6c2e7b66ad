// Malformed model files: every fixture in tests/golden/bad_files/ (made by
// tools/make_bad_model_files.py) must be refused with a sluice::Error naming the file and the
// expected field; every truncation and many single-byte corruptions of the valid bases must be
// refused or parsed, never crash. The fuzzers (tests/fuzz/) explore further from the same seeds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf/gguf_reader.h"
#include "format/safetensors/safetensors_reader.h"
#include "sluice/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(SLUICE_SOURCE_DIR) / "tests" / "golden" / "bad_files";

std::vector<uint8_t> slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool is_gguf(const fs::path& path) {
  return path.extension() == ".gguf";
}

ModelFile read_any(const fs::path& path) {
  return is_gguf(path) ? read_gguf(path.string()) : read_safetensors(path.string());
}

ModelFile parse_any(const fs::path& path, std::span<const uint8_t> bytes, const std::string& name) {
  return is_gguf(path) ? parse_gguf(bytes, name) : parse_safetensors(bytes, name);
}

nlohmann::json expected_messages() {
  std::ifstream in(kCorpus / "expected.json");
  return nlohmann::json::parse(in);
}

// Runs `call`, which must throw sluice::Error; returns its message ("" plus a test failure when
// it returned normally). Any other exception escapes and fails the test.
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "accepted";
  return {};
}

// A truncation or corruption may be accepted or refused; it must not crash or throw anything
// but sluice::Error.
void parse_must_not_crash(const fs::path& base, std::span<const uint8_t> bytes) {
  try {
    (void)parse_any(base, bytes, base.filename().string());
  } catch (const Error&) {
  }
}

TEST(BadFiles, EveryFixtureIsListedInExpected) {
  const auto expected = expected_messages();
  size_t fixtures = 0;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    const auto name = entry.path().filename().string();
    if (name == "expected.json" || name.starts_with("base_")) continue;
    ++fixtures;
    EXPECT_TRUE(expected.contains(name)) << name << " has no entry in expected.json";
  }
  EXPECT_EQ(fixtures, expected.size()) << "expected.json names files that do not exist";
  EXPECT_GE(fixtures, 80u);
}

TEST(BadFiles, EveryFixtureIsRefusedNamingFileAndField) {
  const auto expected = expected_messages();
  for (const auto& [name, substrings] : expected.items()) {
    SCOPED_TRACE(name);
    const fs::path path = kCorpus / name;
    const std::string message = error_of([&] { (void)read_any(path); });
    EXPECT_NE(message.find(name), std::string::npos) << "no file name in: " << message;
    for (const auto& substring : substrings) {
      EXPECT_NE(message.find(substring.get<std::string>()), std::string::npos)
          << "'" << substring.get<std::string>() << "' missing from: " << message;
    }
    // The in-memory parser (what the fuzzers drive) refuses it the same way.
    const auto bytes = slurp(path);
    const std::string parsed = error_of([&] { (void)parse_any(path, bytes, name); });
    EXPECT_NE(parsed.find(name), std::string::npos) << parsed;
  }
}

TEST(BadFiles, BasesAreValid) {
  for (const char* name : {"base_valid.gguf", "base_gguf_writer.gguf", "base_valid.safetensors"}) {
    SCOPED_TRACE(name);
    const ModelFile model = read_any(kCorpus / name);
    EXPECT_EQ(model.tensors().size(), 3u);
  }
  const ModelFile gguf = read_gguf((kCorpus / "base_valid.gguf").string());
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf.get_u32("general.alignment"), 32u);
  EXPECT_EQ(gguf.get_i64("test.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(gguf.tensor("blk.0.attn_q.weight").n_bytes, 68u);
  EXPECT_EQ(gguf.tensor("output_norm.weight").offset, gguf.data_offset + 160);
}

// End of the last tensor's bytes: every shorter prefix of a base must be refused.
uint64_t data_end(const ModelFile& model) {
  uint64_t end = 0;
  for (const auto& tensor : model.tensors()) end = std::max(end, tensor.offset + tensor.n_bytes);
  return end;
}

TEST(BadFiles, EveryTruncationOfTheBasesIsRefused) {
  for (const char* name : {"base_valid.gguf", "base_gguf_writer.gguf", "base_valid.safetensors"}) {
    SCOPED_TRACE(name);
    const fs::path path = kCorpus / name;
    const auto bytes = slurp(path);
    const uint64_t end = data_end(parse_any(path, bytes, name));
    ASSERT_LE(end, bytes.size());
    ASSERT_GT(end, 0u);
    for (uint64_t length = 0; length < end; ++length) {
      const std::string message = error_of([&] {
        (void)parse_any(path, {bytes.data(), length}, name);
      });
      EXPECT_FALSE(message.empty()) << "prefix of " << length << " bytes accepted";
    }
    // Prefixes that only drop trailing padding after the last tensor stay valid.
    for (uint64_t length = end; length <= bytes.size(); ++length) {
      EXPECT_NO_THROW((void)parse_any(path, {bytes.data(), length}, name)) << length;
    }
  }
}

TEST(BadFiles, TruncatedFilesOnDiskAreRefused) {
  const fs::path dir = fs::temp_directory_path() / ("sluice_bad_files_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* name : {"base_valid.gguf", "base_valid.safetensors"}) {
    const auto bytes = slurp(kCorpus / name);
    for (size_t length = 0; length < bytes.size(); length += 37) {
      const fs::path cut = dir / (std::to_string(length) + "_" + name);
      std::ofstream(cut, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(length));
      const std::string message = error_of([&] { (void)read_any(cut); });
      EXPECT_NE(message.find(cut.filename().string()), std::string::npos) << message;
    }
  }
  fs::remove_all(dir);
}

// Sharded snapshot directories: the index is as untrusted as the shards it names. Built here
// from the valid safetensors base, so the committed corpus stays plain files.
TEST(BadFiles, BadSnapshotDirectoriesAreRefused) {
  const fs::path root =
      fs::temp_directory_path() / ("sluice_bad_snapshots_" + std::to_string(getpid()));
  const auto shard = slurp(kCorpus / "base_valid.safetensors");
  struct Case {
    const char* name;
    const char* index;  // model.safetensors.index.json, or nullptr for none
    const char* expect;
  };
  const Case cases[] = {
      {"no_model", nullptr, "model.safetensors"},
      {"index_not_json", "{\"weight_map\": ", "index"},
      {"no_weight_map", "{\"metadata\": {}}", "weight_map"},
      {"escaping_shard", R"({"weight_map": {"embed.weight": "../shard.safetensors"}})", "outside"},
      {"absolute_shard", R"({"weight_map": {"embed.weight": "/etc/passwd"}})", "outside"},
      {"missing_shard", R"({"weight_map": {"embed.weight": "absent.safetensors"}})", "missing"},
      {"tensor_not_in_shard", R"({"weight_map": {"lm_head.weight": "shard.safetensors"}})",
       "lm_head.weight"},
      {"wrong_shard",
       R"({"weight_map": {"embed.weight": "shard.safetensors", "mask": "other.safetensors"}})",
       "appears in two shards"},
      {"shard_not_string", R"({"weight_map": {"embed.weight": 3}})", "embed.weight"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = root / c.name;
    fs::create_directories(dir);
    for (const char* file : {"shard.safetensors", "other.safetensors"}) {
      std::ofstream(dir / file, std::ios::binary)
          .write(reinterpret_cast<const char*>(shard.data()),
                 static_cast<std::streamsize>(shard.size()));
    }
    if (c.index != nullptr) std::ofstream(dir / "model.safetensors.index.json") << c.index;
    const std::string message = error_of([&] { (void)read_safetensors(dir.string()); });
    EXPECT_NE(message.find(c.expect), std::string::npos) << message;
  }
  fs::remove_all(root);
}

// Every byte of each base set to a few hostile values: a cheap, deterministic fuzz pass that
// runs with the ordinary tests.
TEST(BadFiles, SingleByteCorruptionsNeverCrash) {
  for (const char* name : {"base_valid.gguf", "base_gguf_writer.gguf", "base_valid.safetensors"}) {
    SCOPED_TRACE(name);
    const fs::path path = kCorpus / name;
    auto bytes = slurp(path);
    for (size_t i = 0; i < bytes.size(); ++i) {
      const uint8_t original = bytes[i];
      for (uint8_t value : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7F}, uint8_t{0x80},
                            uint8_t{0xFF}, static_cast<uint8_t>(original ^ 0x20)}) {
        bytes[i] = value;
        parse_must_not_crash(path, bytes);
      }
      bytes[i] = original;
    }
  }
}

// GGUF allows arrays of arrays; a file nesting them a hundred thousand deep must be refused
// without recursing off the stack.
TEST(BadFiles, DeeplyNestedGgufArraysAreRefused) {
  std::vector<uint8_t> file = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) file.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  put(0, 8);  // tensors
  put(1, 8);  // one key
  put(4, 8);
  for (char c : std::string("deep")) file.push_back(static_cast<uint8_t>(c));
  put(9, 4);  // ARRAY
  for (int depth = 0; depth < 100000; ++depth) {
    put(9, 4);  // element type ARRAY
    put(1, 8);  // one element
  }
  const std::string message = error_of([&] { (void)parse_gguf(file, "deep.gguf"); });
  EXPECT_NE(message.find("deep"), std::string::npos) << message;
}

}  // namespace
}  // namespace sluice
