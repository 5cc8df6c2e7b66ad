// AVX-512 dot products of F32, F16 and BF16 rows: four 16-lane float accumulators (64
// elements per step), then 16 at a time, then element by element for the tail.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/avx512_util.h"  // first: see its note on GCC 12
#include "backend/cpu/vec_dot_table.h"

namespace sluice::cpu {
namespace {

template <class LoadW, class LoadX, class ScalarW, class ScalarX>
float dot_floats(int64_t n, LoadW load_w, LoadX load_x, ScalarW scalar_w, ScalarX scalar_x) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_fmadd_ps(load_w(i + 16 * k), load_x(i + 16 * k), acc[k]);
    }
  }
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load_w(i), load_x(i), acc[0]);
  float sum = _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += scalar_w(i) * scalar_x(i);
  return sum;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

float dot_f32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);  // [n]
  const auto* b = static_cast<const float*>(x);  // [n]
  return dot_floats(
      n, [&](int64_t i) { return _mm512_loadu_ps(a + i); },
      [&](int64_t i) { return _mm512_loadu_ps(b + i); }, [&](int64_t i) { return a[i]; },
      [&](int64_t i) { return b[i]; });
}

float dot_f16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] half bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] half bits
  auto load = [](const uint16_t* p) { return _mm512_cvtph_ps(loadu256(p)); };
  return dot_floats(
      n, [&](int64_t i) { return load(a + i); }, [&](int64_t i) { return load(b + i); },
      [&](int64_t i) { return half_to_float(a[i]); },
      [&](int64_t i) { return half_to_float(b[i]); });
}

float dot_bf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] bfloat16 bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] bfloat16 bits
  auto load = [](const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(loadu256(p)), 16));
  };
  return dot_floats(
      n, [&](int64_t i) { return load(a + i); }, [&](int64_t i) { return load(b + i); },
      [&](int64_t i) { return bf16_to_float(a[i]); },
      [&](int64_t i) { return bf16_to_float(b[i]); });
}

}  // namespace

void add_avx512_float_kernels(VecDotTable& table) {
  table.kernels[int(QType::F32)] = {dot_f32, CpuIsa::kAvx512};
  table.kernels[int(QType::F16)] = {dot_f16, CpuIsa::kAvx512};
  table.kernels[int(QType::BF16)] = {dot_bf16, CpuIsa::kAvx512};
}

}  // namespace sluice::cpu
