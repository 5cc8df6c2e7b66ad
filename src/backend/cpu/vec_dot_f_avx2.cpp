// AVX2 dot products of the plain float types (F32, F16, BF16) against rows of the same type.
// Four 8-lane float accumulators (32 elements per step) keep the FMA pipes busy; the tail
// of a row that is not a multiple of 32 goes element by element. Float accumulation, so the
// result differs from the double-accumulating reference by summation rounding only.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/vec_dot_table.h"

namespace sluice::cpu {
namespace {

// `load_*(i)` gives 8 floats starting at element i; `scalar_*(i)` one float.
template <class LoadW, class LoadX, class ScalarW, class ScalarX>
float dot_floats(int64_t n, LoadW load_w, LoadX load_x, ScalarW scalar_w, ScalarX scalar_x) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(load_w(i + 8 * k), load_x(i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_w(i), load_x(i), acc[0]);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += scalar_w(i) * scalar_x(i);
  return sum;
}

float dot_f32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);  // [n]
  const auto* b = static_cast<const float*>(x);  // [n]
  return dot_floats(
      n, [&](int64_t i) { return _mm256_loadu_ps(a + i); },
      [&](int64_t i) { return _mm256_loadu_ps(b + i); }, [&](int64_t i) { return a[i]; },
      [&](int64_t i) { return b[i]; });
}

float dot_f16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] half bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] half bits
  auto load = [](const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  return dot_floats(
      n, [&](int64_t i) { return load(a + i); }, [&](int64_t i) { return load(b + i); },
      [&](int64_t i) { return half_to_float(a[i]); },
      [&](int64_t i) { return half_to_float(b[i]); });
}

// bfloat16 is the top half of a float: widen to 32 bits and shift into place.
float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

float dot_bf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] bfloat16 bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] bfloat16 bits
  auto load = [](const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  };
  return dot_floats(
      n, [&](int64_t i) { return load(a + i); }, [&](int64_t i) { return load(b + i); },
      [&](int64_t i) { return bf16_to_float(a[i]); },
      [&](int64_t i) { return bf16_to_float(b[i]); });
}

}  // namespace

void add_avx2_float_kernels(VecDotTable& table) {
  table.kernels[int(QType::F32)] = {dot_f32, CpuIsa::kAvx2};
  table.kernels[int(QType::F16)] = {dot_f16, CpuIsa::kAvx2};
  table.kernels[int(QType::BF16)] = {dot_bf16, CpuIsa::kAvx2};
}

}  // namespace sluice::cpu
