// File: open, map and positional reads over POSIX calls. Every error names the file and the
// system's reason; nothing here interprets the bytes.
#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace sluice {
namespace {

int madvise_flag(AccessHint hint) {
  switch (hint) {
    case AccessHint::sequential:
      return MADV_SEQUENTIAL;
    case AccessHint::random:
      return MADV_RANDOM;
    case AccessHint::will_need:
      return MADV_WILLNEED;
    case AccessHint::dont_need:
      return MADV_DONTNEED;
    case AccessHint::normal:
      break;
  }
  return MADV_NORMAL;
}

}  // namespace

File File::open(const std::string& path, OpenOptions options) {
  int flags = O_RDONLY | O_CLOEXEC;
  if (options.direct) flags |= O_DIRECT;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) fail("io: cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    fail("io: cannot stat ", path, ": ", std::strerror(saved));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("io: not a regular file: ", path);
  }
  return File(path, fd, static_cast<uint64_t>(st.st_size), options.direct);
}

File::File(std::string path, int fd, uint64_t size, bool direct)
    : path_(std::move(path)), fd_(fd), size_(size), direct_(direct) {}

File::File(File&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(std::exchange(other.size_, 0)),
      direct_(other.direct_),
      map_(std::exchange(other.map_, nullptr)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    direct_ = other.direct_;
    map_ = std::exchange(other.map_, nullptr);
  }
  return *this;
}

File::~File() {
  release();
}

void File::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
}

void File::map(AccessHint hint) {
  // A zero-length file has nothing to map (mmap refuses length 0); views of it are empty.
  if (map_ != nullptr || size_ == 0) return;
  void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (mapping == MAP_FAILED) fail("io: cannot map ", path_, ": ", std::strerror(errno));
  map_ = mapping;
  advise(0, size_, hint);
}

std::span<const uint8_t> File::view(uint64_t offset, uint64_t length) {
  if (offset > size_ || length > size_ - offset) {
    fail("io: ", path_, ": range [", offset, ", +", length, ") is outside the file (size ", size_,
         ")");
  }
  if (length == 0) return {};
  map();
  return {static_cast<const uint8_t*>(map_) + offset, static_cast<size_t>(length)};
}

void File::advise(uint64_t offset, uint64_t length, AccessHint hint) const {
  if (map_ == nullptr || offset >= size_) return;
  // madvise wants a page-aligned start; widen the range down to the page boundary.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = offset + std::min(length, size_ - offset);
  ::madvise(static_cast<uint8_t*>(map_) + start, end - start, madvise_flag(hint));
}

void File::read_at(uint64_t offset, std::span<uint8_t> dst) const {
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t got =
        ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("io: read failed in ", path_, " at offset ", offset + done, ": ", std::strerror(errno));
    }
    if (got == 0) {
      fail("io: ", path_, ": file ends at ", offset + done, " while reading ", dst.size(),
           " bytes at offset ", offset);
    }
    done += static_cast<size_t>(got);
  }
}

}  // namespace sluice
