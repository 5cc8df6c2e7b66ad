// Snapshots that cannot be read in place — gpt-oss's experts are stored transposed with gate
// and up interleaved, or as MXFP4 blocks split from their scales — run through a temporary GGUF
// that `sluice convert` writes when the model is loaded, in the snapshot's own float type (its
// MXFP4 experts stay MXFP4) so the numbers are the snapshot's. The file is removed when the
// model is closed. A user who loads such a model often converts it once instead (the log line
// says so).
#pragma once

#include <string>

namespace sluice {

class SnapshotConversion {
 public:
  // `path` as given (a GGUF, or a snapshot readable in place), or converts it and points at the
  // temporary GGUF. Refuses when the temporary folder lacks the room, naming the command.
  explicit SnapshotConversion(const std::string& path);
  ~SnapshotConversion();
  SnapshotConversion(const SnapshotConversion&) = delete;
  SnapshotConversion& operator=(const SnapshotConversion&) = delete;

  const std::string& path() const { return path_; }  // the file to open

 private:
  std::string path_;
  std::string temporary_;  // empty: nothing converted
};

}  // namespace sluice
