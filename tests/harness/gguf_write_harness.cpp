// gguf_write_harness OUT.gguf [ALIGNMENT [flat]]: writes a fixed GGUF file with our writer — one
// key of every metadata type (arrays and nested arrays included) and tensors of several types —
// so the e2e tests can check gguf-py reads back exactly what they expect. `flat` leaves out the
// nested array: the GGUF spec allows arrays of arrays, but llama.cpp's reader refuses them.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "format/gguf/gguf_writer.h"

namespace {

std::vector<uint8_t> byte_pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

void add_metadata(sluice::GgufWriter& writer, bool nested_arrays) {
  using sluice::MetaValue;
  writer.add_metadata("general.architecture", MetaValue::string("llama"));
  writer.add_metadata("test.u8", MetaValue::scalar<uint8_t>(200));
  writer.add_metadata("test.i8", MetaValue::scalar<int8_t>(-100));
  writer.add_metadata("test.u16", MetaValue::scalar<uint16_t>(60000));
  writer.add_metadata("test.i16", MetaValue::scalar<int16_t>(-30000));
  writer.add_metadata("test.u32", MetaValue::scalar<uint32_t>(4000000000u));
  writer.add_metadata("test.i32", MetaValue::scalar<int32_t>(-2000000000));
  writer.add_metadata("test.u64", MetaValue::scalar<uint64_t>(18446744073709551615ull));
  writer.add_metadata("test.i64", MetaValue::scalar<int64_t>(-9223372036854775807ll));
  writer.add_metadata("test.f32", MetaValue::scalar(0.1f));
  writer.add_metadata("test.f64", MetaValue::scalar(0.1));
  writer.add_metadata("test.bool", MetaValue::scalar(true));
  writer.add_metadata("test.string", MetaValue::string("h\xC3\xA9llo"));
  writer.add_metadata("test.array.u8", MetaValue::array(std::vector<uint8_t>{1, 2, 255}));
  writer.add_metadata("test.array.i16", MetaValue::array(std::vector<int16_t>{-1, 32767}));
  writer.add_metadata("test.array.i32", MetaValue::array(std::vector<int32_t>{-7, 8, 9}));
  writer.add_metadata("test.array.u64", MetaValue::array(std::vector<uint64_t>{1, 2}));
  writer.add_metadata("test.array.f32", MetaValue::array(std::vector<float>{0.5f, -2.0f}));
  writer.add_metadata("test.array.f64", MetaValue::array(std::vector<double>{1.25}));
  writer.add_metadata("test.array.bool", MetaValue::array(std::vector<bool>{true, false}));
  writer.add_metadata("test.array.string", MetaValue::string_array({"a", "", "\xC3\xBC"}));
  writer.add_metadata("test.array.empty", MetaValue::array(std::vector<int32_t>{}));
  if (!nested_arrays) return;
  writer.add_metadata("test.array.nested",
                      MetaValue::array_of_arrays({MetaValue::array(std::vector<int32_t>{1, 2}),
                                                  MetaValue::array(std::vector<int32_t>{3})}));
}

void add_tensors(sluice::GgufWriter& writer) {
  std::vector<float> f32 = {1.0f, -2.0f, 3.5f, 0.0f, 1e-3f, 7.0f};  // [3, 2]
  writer.add_tensor("t.f32", sluice::QType::F32, {3, 2},
                    {reinterpret_cast<const uint8_t*>(f32.data()), f32.size() * sizeof(float)});
  writer.add_tensor("t.f16", sluice::QType::F16, {5}, byte_pattern(10, 3));
  writer.add_tensor("t.i32", sluice::QType::I32, {2, 2}, byte_pattern(16, 9));
  // Q8_0 blocks: a 2-byte half scale (0x3C00 = 1.0) then 32 int8 quants.
  std::vector<uint8_t> q8 = byte_pattern(34 * 2, 5);
  q8[0] = 0x00, q8[1] = 0x3C, q8[34] = 0x00, q8[35] = 0x38;
  writer.add_tensor("t.q8_0", sluice::QType::Q8_0, {32, 2}, q8);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_write_harness OUT.gguf [ALIGNMENT [flat]]\n");
    return 2;
  }
  try {
    sluice::GgufWriter writer;
    if (argc > 2) writer.set_alignment(static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)));
    const bool flat = argc > 3 && std::strcmp(argv[3], "flat") == 0;
    add_metadata(writer, !flat);
    add_tensors(writer);
    writer.write(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_write_harness: %s\n", e.what());
    return 1;
  }
  return 0;
}
