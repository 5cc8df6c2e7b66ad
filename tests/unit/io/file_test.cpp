// File and OutputFile: size, mapped views, positional reads, range errors that name the file,
// and atomic output that leaves nothing behind on failure.
#include "io/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/output_file.h"
#include "sluice/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_io_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(IoTest, WritesAtomicallyThenMapsAndReads) {
  {
    OutputFile out(path("a.bin"));
    out.write("hello ", 6);
    out.write_zeros(3);
    out.write("world", 5);
    EXPECT_FALSE(fs::exists(path("a.bin")));
    out.commit();
  }
  File file = File::open(path("a.bin"));
  EXPECT_EQ(file.size(), 14u);
  auto view = file.view(9, 5);
  EXPECT_EQ(std::string(view.begin(), view.end()), "world");
  EXPECT_EQ(file.bytes()[6], 0);
  std::string buffer(5, '\0');
  file.read_at(0, {reinterpret_cast<uint8_t*>(buffer.data()), 5});
  EXPECT_EQ(buffer, "hello");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(IoTest, ErrorsNameTheFile) {
  try {
    File::open(path("missing"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  std::ofstream(path("small")) << "abc";
  File file = File::open(path("small"));
  EXPECT_THROW(file.view(2, 5), Error);
  uint8_t buffer[8];
  EXPECT_THROW(file.read_at(0, buffer), Error);
  EXPECT_THROW(File::open(dir_.string()), Error);
}

TEST_F(IoTest, EmptyFileAndUncommittedOutput) {
  {
    OutputFile out(path("gone.bin"));
    out.write("x", 1);
  }
  EXPECT_FALSE(fs::exists(path("gone.bin")));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
  std::ofstream(path("empty")).close();
  File file = File::open(path("empty"));
  EXPECT_EQ(file.size(), 0u);
  EXPECT_TRUE(file.bytes().empty());
}

// Only a regular file is replaced: a directory or a device at the path is refused untouched.
TEST_F(IoTest, OutputNeverReplacesWhatIsNotAFile) {
  fs::create_directory(path("dir"));
  EXPECT_THROW(OutputFile(path("dir")), Error);
  EXPECT_TRUE(fs::is_directory(path("dir")));
  EXPECT_THROW(OutputFile("/dev/null"), Error);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  std::ofstream(path("old.bin")) << "old";
  OutputFile out(path("old.bin"));
  out.write("new", 3);
  out.commit();
  EXPECT_EQ(fs::file_size(path("old.bin")), 3u);
}

}  // namespace
}  // namespace sluice
