// OutputFile: writes a new file under a temporary name in the destination's directory and
// renames it into place on commit(), so a failure never leaves a partial file at the final
// path. Buffered sequential writes only; knows nothing of what is written.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sluice {

class OutputFile {
 public:
  // Creates `<path>.tmp.<pid>.<n>` next to `path`; throws naming the path on failure, or when
  // `path` exists and is not a regular file (a device such as /dev/null, a directory).
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Without commit(), the temporary file is removed.
  ~OutputFile();

  void write(std::span<const uint8_t> bytes);
  void write(const void* data, size_t size) { write({static_cast<const uint8_t*>(data), size}); }
  void write_zeros(uint64_t count);
  uint64_t position() const { return position_; }

  // Flushes, fsyncs and renames onto the final path.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void flush();

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;  // [kBufferBytes] pending bytes, written when full
};

// Writes all of `bytes` to file descriptor `fd` (EINTR and short writes handled); `what` names
// the destination in the error.
void write_all(int fd, std::span<const uint8_t> bytes, const std::string& what);

}  // namespace sluice
