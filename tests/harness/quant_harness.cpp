// quant_harness: drives the quant/ reference kernels from pytest (tests/e2e/test_quant_parity.py).
// Raw bytes in on stdin, raw bytes out on stdout, so Python compares them with gguf-py and
// ml_dtypes bit for bit. Knows nothing of files or models.
//   quant_harness dequant TYPE            < blocks        > float32 LE
//   quant_harness quant TYPE              < float32 LE    > blocks
//   quant_harness fp8_block_scaled R C [BR BC]  < e4m3 weight, then float32 scale_inv > float32
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace {

std::vector<uint8_t> read_stdin() {
  std::vector<uint8_t> data;
  uint8_t buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) {
    data.insert(data.end(), buffer, buffer + got);
  }
  return data;
}

void write_stdout(const void* data, size_t bytes) {
  if (std::fwrite(data, 1, bytes, stdout) != bytes) sluice::fail("short write to stdout");
}

sluice::QType parse_type(const std::string& name) {
  const auto type = sluice::qtype_from_name(name);
  if (!type) sluice::fail("unknown type '", name, "'");
  return *type;
}

int dequant(const std::string& name) {
  const sluice::QType type = parse_type(name);
  const auto& traits = sluice::traits_of(type);
  const std::vector<uint8_t> in = read_stdin();
  if (in.size() % traits.block_bytes != 0) {
    sluice::fail(in.size(), " bytes is not a whole number of ", name, " blocks");
  }
  const int64_t n = int64_t(in.size() / traits.block_bytes) * traits.block_size;
  // Copy into float storage: its 4-byte alignment satisfies every block struct.
  std::vector<float> aligned((in.size() + 3) / 4);
  std::memcpy(aligned.data(), in.data(), in.size());
  std::vector<float> out(static_cast<size_t>(n));
  sluice::dequantize_row(type, aligned.data(), out.data(), n);
  write_stdout(out.data(), out.size() * sizeof(float));
  return 0;
}

int quant(const std::string& name) {
  const sluice::QType type = parse_type(name);
  const std::vector<uint8_t> in = read_stdin();
  if (in.size() % sizeof(float) != 0) sluice::fail("input is not whole float32 values");
  std::vector<float> values(in.size() / sizeof(float));
  std::memcpy(values.data(), in.data(), in.size());
  const auto bytes = sluice::row_bytes(type, values.size());
  if (!bytes) sluice::fail(values.size(), " values is not a whole number of ", name, " blocks");
  std::vector<float> out((*bytes + 3) / 4);
  sluice::quantize_row(type, values.data(), out.data(), int64_t(values.size()));
  write_stdout(out.data(), *bytes);
  return 0;
}

int fp8_block_scaled(int argc, char** argv) {
  if (argc != 4 && argc != 6) sluice::fail("usage: fp8_block_scaled ROWS COLS [BR BC]");
  const int64_t rows = std::stoll(argv[2]), cols = std::stoll(argv[3]);
  const int64_t br = argc == 6 ? std::stoll(argv[4]) : 128;
  const int64_t bc = argc == 6 ? std::stoll(argv[5]) : 128;
  const int64_t scales = ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
  const std::vector<uint8_t> in = read_stdin();
  if (int64_t(in.size()) != rows * cols + scales * 4) sluice::fail("wrong input size ", in.size());
  std::vector<float> scale_inv(static_cast<size_t>(scales));
  std::memcpy(scale_inv.data(), in.data() + rows * cols, size_t(scales) * 4);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  sluice::dequantize_fp8_block_scaled(in.data(), scale_inv.data(), out.data(), rows, cols, br, bc);
  write_stdout(out.data(), out.size() * sizeof(float));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "dequant" && argc == 3) return dequant(argv[2]);
    if (mode == "quant" && argc == 3) return quant(argv[2]);
    if (mode == "fp8_block_scaled") return fp8_block_scaled(argc, argv);
    std::cerr << "usage: quant_harness dequant|quant TYPE, or fp8_block_scaled ROWS COLS [BR BC]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "quant_harness: " << e.what() << "\n";
    return 1;
  }
}
