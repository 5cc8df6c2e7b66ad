// kquant_harness TYPE < float32_le > blocks: quantizes the whole of stdin (a multiple of 256
// little-endian floats) to TYPE (Q2_K … Q6_K) through quantize_row, so the dispatch is
// exercised with the K-quant quantizers behind it, and writes the blocks to stdout for
// tests/e2e/test_kquant_rmse.py to decode with gguf-py. Exit 2 on misuse.
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "quant/qtype.h"
#include "quant/quantize.h"

int main(int argc, char** argv) {
  const std::set<std::string> k_types = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
  if (argc != 2 || !k_types.count(argv[1])) {
    std::fprintf(stderr, "usage: kquant_harness Q2_K|Q3_K|Q4_K|Q5_K|Q6_K < floats > blocks\n");
    return 2;
  }
  const sluice::QType type = *sluice::qtype_from_name(argv[1]);
  std::vector<char> raw;
  char buf[1 << 16];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
    raw.insert(raw.end(), buf, buf + got);
  }
  if (raw.size() % sizeof(float) != 0) {
    std::fprintf(stderr, "kquant_harness: stdin is %zu bytes, not whole floats\n", raw.size());
    return 2;
  }
  const int64_t n = int64_t(raw.size() / sizeof(float));
  std::vector<float> x(size_t(n), 0.0f);
  std::memcpy(x.data(), raw.data(), raw.size());
  try {
    const auto bytes = sluice::row_bytes(type, uint64_t(n));
    if (!bytes) {
      std::fprintf(stderr, "kquant_harness: %lld floats is not whole blocks\n", (long long)n);
      return 2;
    }
    // uint64_t storage keeps the buffer aligned for every block struct.
    std::vector<uint64_t> out((*bytes + 7) / 8);
    sluice::quantize_row(type, x.data(), out.data(), n);
    std::fwrite(out.data(), 1, *bytes, stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kquant_harness: %s\n", e.what());
    return 2;
  }
  return 0;
}
