// File: one read-only file on disk — its size, a zero-copy read-only mapping of the whole file
// with bounds-checked views of byte ranges, and positional reads (pread) that survive EINTR and
// short reads. Knows nothing of file formats; io_uring and the read pool live elsewhere.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace sluice {

enum class AccessHint { normal, sequential, random, will_need, dont_need };

struct OpenOptions {
  // O_DIRECT: bypasses the page cache for streaming reads; read_at() then needs offset, length
  // and buffer aligned to the device's logical block size (4 KiB is always safe).
  bool direct = false;
};

class File {
 public:
  // Opens `path` read-only; throws sluice::Error naming the path and the system error.
  static File open(const std::string& path, OpenOptions options = {});

  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  bool is_direct() const { return direct_; }

  // Maps the whole file (MAP_SHARED, PROT_READ) once; later calls are no-ops. Mapping only
  // reserves address space: pages are read when a view is touched.
  void map(AccessHint hint = AccessHint::normal);
  bool is_mapped() const { return map_ != nullptr || size_ == 0; }

  // The mapped bytes [offset, offset + length); maps on first use and throws when the range
  // is outside the file.
  std::span<const uint8_t> view(uint64_t offset, uint64_t length);
  std::span<const uint8_t> bytes() { return view(0, size_); }

  // madvise() over a mapped range: a hint, so failures are ignored.
  void advise(uint64_t offset, uint64_t length, AccessHint hint) const;

  // Reads exactly dst.size() bytes at `offset`; throws when the file ends first.
  void read_at(uint64_t offset, std::span<uint8_t> dst) const;

 private:
  File(std::string path, int fd, uint64_t size, bool direct);
  void release() noexcept;

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool direct_ = false;
  void* map_ = nullptr;  // whole-file mapping, or null until map()
};

}  // namespace sluice
