// OutputFile: temporary file + rename for atomic output, and a write loop that survives
// EINTR and short writes. Errors name the final path.
#include "io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace sluice {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

std::string temp_name_for(const std::string& path) {
  // Unique per process and per call, so two writers in one process never share a temp name.
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

void write_all(int fd, std::span<const uint8_t> bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail("io: cannot write ", what, ": ", std::strerror(errno));
    }
    done += static_cast<size_t>(put);
  }
}

OutputFile::OutputFile(std::string path)
    : path_(std::move(path)), temp_path_(temp_name_for(path_)) {
  // The rename would replace whatever is there: never a device (`-o /dev/null` run as root once
  // replaced the device with a file), a directory or anything else but a file.
  struct stat existing {};
  if (::stat(path_.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    fail("io: ", path_, " exists and is not a regular file; it is not replaced");
  }
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("io: cannot create ", temp_path_, ": ", std::strerror(errno));
  buffer_.reserve(kBufferBytes);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void OutputFile::write(std::span<const uint8_t> bytes) {
  position_ += bytes.size();
  if (buffer_.size() + bytes.size() > kBufferBytes) flush();
  if (bytes.size() >= kBufferBytes) {
    write_all(fd_, bytes, temp_path_);
    return;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

void OutputFile::write_zeros(uint64_t count) {
  static const uint8_t kZeros[4096] = {};
  while (count > 0) {
    const uint64_t chunk = std::min<uint64_t>(count, sizeof(kZeros));
    write({kZeros, static_cast<size_t>(chunk)});
    count -= chunk;
  }
}

void OutputFile::flush() {
  if (buffer_.empty()) return;
  write_all(fd_, buffer_, temp_path_);
  buffer_.clear();
}

void OutputFile::commit() {
  if (fd_ < 0) fail("io: ", path_, ": output already committed");
  flush();
  if (::fsync(fd_) != 0) fail("io: cannot sync ", temp_path_, ": ", std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_path_.c_str());
    fail("io: cannot close ", temp_path_, ": ", std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int saved = errno;
    ::unlink(temp_path_.c_str());
    fail("io: cannot rename ", temp_path_, " to ", path_, ": ", std::strerror(saved));
  }
}

}  // namespace sluice
