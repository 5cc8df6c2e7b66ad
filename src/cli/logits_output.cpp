// Logits out of `sluice eval`. The file is written under a temporary name in the same folder and
// renamed at the end (DESIGN.md: no partial output file); JSON floats use %.9g, the shortest
// fixed format that round-trips every float32.
#include "cli/logits_output.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "sluice/error.h"

namespace sluice::cli {
namespace {

// The file format is little-endian; the hosts Sluice supports are too, so bytes go out as is.
static_assert(std::endian::native == std::endian::little, "logits files are little-endian");

void append_float(std::string& out, float value) {
  if (!std::isfinite(value)) {
    out += "null";  // JSON has no inf/nan; a reader sees a hole rather than a wrong number
    return;
  }
  char text[32];
  int n = std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  out.append(text, static_cast<size_t>(n));
}

}  // namespace

void write_logits_file(const std::string& path, std::span<const float> logits) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (!file) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  int error = 0;  // the first failure's errno
  auto failed = [&error] {
    if (!error) error = errno ? errno : EIO;
  };
  errno = 0;
  if (std::fwrite(logits.data(), sizeof(float), logits.size(), file) != logits.size()) failed();
  if (!error && std::fflush(file) != 0) failed();
  if (!error && ::fsync(::fileno(file)) != 0) failed();
  if (std::fclose(file) != 0) failed();
  if (!error && std::rename(temp.c_str(), path.c_str()) != 0) failed();
  if (!error) return;
  std::remove(temp.c_str());
  throw Error("cannot write '" + path + "': " + std::strerror(error));
}

std::string logits_json(int64_t n_vocab, int64_t n_tokens, std::span<const float> logits,
                        const std::vector<int32_t>& greedy_tokens) {
  std::string out = "{\"n_vocab\": " + std::to_string(n_vocab) +
                    ", \"n_tokens\": " + std::to_string(n_tokens) + ", \"logits\": [";
  out.reserve(out.size() + logits.size() * 16);
  const size_t width = static_cast<size_t>(n_vocab);
  for (size_t row = 0; row * width < logits.size(); ++row) {
    out += row ? ", [" : "[";
    for (size_t i = 0; i < width; ++i) {
      if (i) out += ", ";
      append_float(out, logits[row * width + i]);
    }
    out += "]";
  }
  out += "], \"greedy_tokens\": [";
  for (size_t i = 0; i < greedy_tokens.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(greedy_tokens[i]);
  }
  out += "]}\n";
  return out;
}

std::string top_logits_summary(std::span<const float> row, int k) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t n = std::min(ids.size(), static_cast<size_t>(k));
  // Stable order on ties (lowest id first) so the summary is the same on every run.
  std::partial_sort(
      ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    char line[64];
    int len = std::snprintf(line, sizeof line, "  %8d  %12.6f\n", ids[i],
                            static_cast<double>(row[ids[i]]));
    out.append(line, static_cast<size_t>(len));
  }
  return out;
}

int32_t argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace sluice::cli
