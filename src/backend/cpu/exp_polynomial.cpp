// exp_polynomial (see exp_polynomial.h), element-wise with explicit fused multiply-adds so any
// compiler and ISA give the vector algorithm's exact results.
#include "backend/cpu/exp_polynomial.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace sluice::cpu {

float exp_polynomial(float x) {
  // x = n ln2 + b with n integral: z carries n in its low mantissa bits (round-to-nearest
  // through the 1.5 * 2^23 shift), b is the reduced argument, |b| <= ln2 / 2.
  const float shift = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));  // 2^n
  const float u = b * b;
  // e^b - 1 ~ b * (c0 + c1 b) + b^2 ((c2 + c3 b) + b^2 (c4 + c5 b))
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  // 2^n is not a normal float: scale in two steps, or saturate beyond |n| > 192.
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

}  // namespace sluice::cpu
