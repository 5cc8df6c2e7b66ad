// FP8 block-scaled dot products (E4M3 weights, a float32 scale per block, float32 activations):
// the quant/ reference against the float64 dot of dequantize_fp8_block_scaled's output, every
// SIMD kernel this CPU runs against the reference, exact decoding of every E4M3 code, NaN codes,
// and matvec's thread-count independence. Tolerances are relative to sum |w_i x_i| of the
// dequantized row; worst seen on AVX2 over 200 random rows per (length, block) case, in
// parentheses (the default 6 rows per case show about 2e-7):
//   reference vs float64: 4e-6 (5.3e-7, n=127 with block 1): float products and sums, one
//                         rounding each; the float64 side rounds each decode * scale once, as
//                         dequantization does.
//   SIMD vs reference:    4e-6 (3.2e-7, n=33): the same products (FMA leaves them unrounded),
//                         sums in another order (8 or 16 lanes per block, blocks summed per lane).
// Short rows with cancellation come closest; the worst-case rounding bound, about
// (block + blocks) * 2^-24, is ~1e-5 for 7168-wide rows. Decoding is checked exactly, code by
// code (EveryCodeDecodesExactly), so the tolerance only has to catch block and scale mistakes.
// Random rows avoid the NaN codes 0x7F / 0xFF; a NaN code anywhere makes every kernel return
// NaN (the reference by IEEE propagation, the SIMD kernels by checking for the codes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/fp8_dot.h"
#include "quant/dequantize.h"
#include "quant/dot_reference.h"
#include "quant/float_formats.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

using cpu::CpuIsa;

constexpr double kReferenceTolerance = 4e-6;
constexpr double kKernelTolerance = 4e-6;

// Row lengths: below one vector, odd, around block and vector edges, and model-sized rows.
constexpr int64_t kLengths[] = {1, 7, 8, 31, 33, 100, 127, 128, 129, 300, 1000, 4096, 4109, 7168};
// Block widths: the checkpoints' 128, one that is not a multiple of any vector width, and 1.
constexpr int64_t kBlocks[] = {128, 100, 64, 1};

std::vector<CpuIsa> simd_isas() {
  std::vector<CpuIsa> isas;
  for (const CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu::isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

int64_t n_blocks(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// Random E4M3 bytes, every code but the two NaN codes.
std::vector<uint8_t> random_fp8(int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> out(static_cast<size_t>(n));  // [n]
  for (uint8_t& b : out) {
    do {
      b = uint8_t(rng());
    } while ((b & 0x7f) == 0x7f);
  }
  return out;
}

// Scales spread over 2^-14 .. 2^-4 (checkpoint weight_scale_inv values sit around 1e-4..1e-2).
std::vector<float> random_scales(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-14.0f, -4.0f);
  std::vector<float> out(static_cast<size_t>(count));  // [count]
  for (float& s : out) s = std::exp2(exponent(rng));
  return out;
}

std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(n));  // [n]
  for (float& v : out) v = value(rng);
  return out;
}

struct ExactDot {
  double value;
  double magnitude;  // sum |w_i x_i|, what tolerances scale with
};

// The float64 dot of the dequantized row (one row of dequantize_fp8_block_scaled) with x.
ExactDot exact_dot(const std::vector<uint8_t>& w, const std::vector<float>& scales,
                   const std::vector<float>& x, int64_t block) {
  const auto n = int64_t(w.size());
  std::vector<float> wf(w.size());  // [n]
  dequantize_fp8_block_scaled(w.data(), scales.data(), wf.data(), 1, n, 1, block);
  ExactDot out{0.0, 0.0};
  for (size_t i = 0; i < w.size(); ++i) {
    const double product = double(wf[i]) * double(x[i]);
    out.value += product;
    out.magnitude += std::fabs(product);
  }
  return out;
}

// Copies of a row's inputs at addresses that no vector load would choose: weights 1 byte past
// a 64-byte boundary, floats 4 bytes past one.
class Unaligned {
 public:
  Unaligned(const std::vector<uint8_t>& w, const std::vector<float>& scales,
            const std::vector<float>& x)
      : w_buffer_(w.size() + 80), s_buffer_(scales.size() + 20), x_buffer_(x.size() + 20) {
    w_ = at(w_buffer_.data(), 1);
    s_ = at(s_buffer_.data(), 4);
    x_ = at(x_buffer_.data(), 4);
    std::copy(w.begin(), w.end(), w_);
    std::copy(scales.begin(), scales.end(), s_);
    std::copy(x.begin(), x.end(), x_);
  }
  const uint8_t* w() const { return w_; }
  const float* scales() const { return s_; }
  const float* x() const { return x_; }

 private:
  template <class T>
  static T* at(T* p, uintptr_t offset_bytes) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    const uintptr_t target = (address + 63) / 64 * 64 + offset_bytes;
    return p + (target - address) / sizeof(T);
  }
  std::vector<uint8_t> w_buffer_;
  std::vector<float> s_buffer_, x_buffer_;
  uint8_t* w_;
  float* s_;
  float* x_;
};

// Worst error / magnitude seen, printed at the end of a test so runs show the margin.
struct Worst {
  double ratio = 0.0;
  int64_t n = 0, block = 0;
  void see(double error, double magnitude, int64_t n_at, int64_t block_at) {
    if (error / magnitude <= ratio) return;
    ratio = error / magnitude;
    n = n_at;
    block = block_at;
  }
};

TEST(Fp8Dot, ReferenceMatchesFloat64) {
  std::mt19937 rng(8);
  Worst worst;
  for (const int64_t block : kBlocks) {
    for (const int64_t n : kLengths) {
      for (int trial = 0; trial < 6; ++trial) {
        const std::vector<uint8_t> w = random_fp8(n, rng);
        const std::vector<float> scales = random_scales(n_blocks(n, block), rng);
        const std::vector<float> x = random_activations(n, rng);
        const float got =
            vec_dot_fp8_e4m3_block_scaled_reference(w.data(), scales.data(), x.data(), n, block);
        const ExactDot exact = exact_dot(w, scales, x, block);
        if (exact.magnitude == 0.0) {
          EXPECT_EQ(got, 0.0f);
          continue;
        }
        const double error = std::fabs(double(got) - exact.value);
        worst.see(error, exact.magnitude, n, block);
        EXPECT_LE(error, kReferenceTolerance * exact.magnitude)
            << "n=" << n << " block=" << block << " trial " << trial << ": got " << got
            << ", exact " << exact.value;
      }
    }
  }
  std::cout << "fp8 reference vs float64: worst " << worst.ratio << " of sum |w x| (n=" << worst.n
            << ", block=" << worst.block << ")\n";
}

// The `isa` kernel against the reference on random rows of every length and block width, from
// unaligned addresses.
void check_kernel(CpuIsa isa) {
  const cpu::Fp8DotKernel kernel = cpu::fp8_e4m3_dot_kernel(isa);
  ASSERT_EQ(kernel.isa, isa);
  std::mt19937 rng(80);
  Worst worst;
  for (const int64_t block : kBlocks) {
    for (const int64_t n : kLengths) {
      for (int trial = 0; trial < 6; ++trial) {
        const std::vector<uint8_t> w = random_fp8(n, rng);
        const std::vector<float> scales = random_scales(n_blocks(n, block), rng);
        const std::vector<float> x = random_activations(n, rng);
        const Unaligned in(w, scales, x);
        const float expected =
            vec_dot_fp8_e4m3_block_scaled_reference(w.data(), scales.data(), x.data(), n, block);
        const float got = kernel.fn(in.w(), in.scales(), in.x(), n, block);
        const ExactDot exact = exact_dot(w, scales, x, block);
        if (exact.magnitude == 0.0) {
          EXPECT_EQ(got, 0.0f);
          continue;
        }
        const double error = std::fabs(double(got) - double(expected));
        worst.see(error, exact.magnitude, n, block);
        EXPECT_LE(error, kKernelTolerance * exact.magnitude)
            << cpu::isa_name(isa) << " n=" << n << " block=" << block << " trial " << trial
            << ": got " << got << ", reference " << expected;
      }
    }
  }
  std::cout << "fp8 " << cpu::isa_name(isa) << " vs reference: worst " << worst.ratio
            << " of sum |w x| (n=" << worst.n << ", block=" << worst.block << ")\n";
}

TEST(Fp8Dot, Avx2MatchesReference) {
  if (!cpu::isa_supported(CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  check_kernel(CpuIsa::kAvx2);
}

TEST(Fp8Dot, Avx512MatchesReference) {
  if (!cpu::isa_supported(CpuIsa::kAvx512)) {
    GTEST_SKIP() << "CPU lacks AVX-512 (F, BW, VL and VNNI are all needed)";
  }
  check_kernel(CpuIsa::kAvx512);
}

// Every non-NaN code decodes exactly: with x one-hot at i and scale 1, the dot is the decoded
// weight i itself (all other products are zeros), on every ISA including the scalar reference.
TEST(Fp8Dot, EveryCodeDecodesExactly) {
  std::vector<uint8_t> w(256);  // [256] code c at index c, NaN codes replaced by 0
  for (int c = 0; c < 256; ++c) w[size_t(c)] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
  const std::vector<float> scales(2, 1.0f);  // [ceil(256 / 128)]
  std::vector<CpuIsa> isas = simd_isas();
  isas.insert(isas.begin(), CpuIsa::kScalar);
  for (const CpuIsa isa : isas) {
    const cpu::Fp8DotFn dot = cpu::fp8_e4m3_dot_kernel(isa).fn;
    std::vector<float> x(256, 0.0f);  // [256]
    for (int c = 0; c < 256; ++c) {
      x[size_t(c)] = 1.0f;
      const float want = fp8_e4m3_to_fp32(w[size_t(c)]);
      EXPECT_EQ(dot(w.data(), scales.data(), x.data(), 256, 128), want)
          << cpu::isa_name(isa) << " code 0x" << std::hex << c;
      x[size_t(c)] = 0.0f;
    }
  }
}

// Rows holding all 254 non-NaN codes (shuffled, several times over, with a short tail).
TEST(Fp8Dot, AllCodesInOneRow) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) != 0x7f) codes.push_back(uint8_t(c));
  }
  std::mt19937 rng(254);
  std::vector<uint8_t> w;
  for (int copy = 0; copy < 5; ++copy) {
    std::shuffle(codes.begin(), codes.end(), rng);
    w.insert(w.end(), codes.begin(), codes.end());
  }
  w.resize(w.size() + 3, 0x38);  // 1273 = not a multiple of 8, 16 or 128
  const auto n = int64_t(w.size());
  const std::vector<float> scales = random_scales(n_blocks(n, 128), rng);
  const std::vector<float> x = random_activations(n, rng);
  const ExactDot exact = exact_dot(w, scales, x, 128);
  const float reference =
      vec_dot_fp8_e4m3_block_scaled_reference(w.data(), scales.data(), x.data(), n, 128);
  EXPECT_LE(std::fabs(double(reference) - exact.value), kReferenceTolerance * exact.magnitude);
  for (const CpuIsa isa : simd_isas()) {
    const Unaligned in(w, scales, x);
    const float got = cpu::fp8_e4m3_dot_kernel(isa).fn(in.w(), in.scales(), in.x(), n, 128);
    EXPECT_LE(std::fabs(double(got) - double(reference)), kKernelTolerance * exact.magnitude)
        << cpu::isa_name(isa) << ": got " << got << ", reference " << reference;
  }
}

// A NaN code (either sign) anywhere, in a full vector step, a block's tail or the row's last
// element, makes the dot NaN on every ISA, even against a zero activation (NaN * 0 is NaN).
TEST(Fp8Dot, NanCodesGiveNan) {
  std::mt19937 rng(127);
  const int64_t n = 300;  // blocks 128, 128, 44: tails of 12 (after 32s) and of 4 (after 8s)
  std::vector<float> x = random_activations(n, rng);
  const std::vector<float> scales = random_scales(n_blocks(n, 128), rng);
  std::vector<CpuIsa> isas = simd_isas();
  isas.insert(isas.begin(), CpuIsa::kScalar);
  for (const uint8_t nan_code : {uint8_t(0x7f), uint8_t(0xff)}) {
    for (const int64_t at : {int64_t(0), int64_t(37), int64_t(127), int64_t(250), n - 1}) {
      std::vector<uint8_t> w = random_fp8(n, rng);
      w[size_t(at)] = nan_code;
      x[size_t(at)] = 0.0f;
      for (const CpuIsa isa : isas) {
        const float got =
            cpu::fp8_e4m3_dot_kernel(isa).fn(w.data(), scales.data(), x.data(), n, 128);
        EXPECT_TRUE(std::isnan(got)) << cpu::isa_name(isa) << " code 0x" << std::hex
                                     << int(nan_code) << std::dec << " at " << at << ": " << got;
      }
    }
  }
}

TEST(Fp8Dot, ReferenceRefusesMisuse) {
  const uint8_t w[4] = {};
  const float s[1] = {1.0f};
  const float x[4] = {};
  EXPECT_THROW(vec_dot_fp8_e4m3_block_scaled_reference(w, s, x, 4, 0), Error);
  EXPECT_THROW(vec_dot_fp8_e4m3_block_scaled_reference(w, s, x, -1, 128), Error);
  EXPECT_EQ(vec_dot_fp8_e4m3_block_scaled_reference(w, s, x, 0, 128), 0.0f);
}

TEST(Fp8Dot, RowScalesPickTheBlockRow) {
  std::vector<float> scale_inv(3 * 4);  // [ceil(300 / 128), ceil(400 / 128)]
  std::iota(scale_inv.begin(), scale_inv.end(), 0.0f);
  EXPECT_EQ(fp8_row_block_scales(scale_inv.data(), 0, 400), scale_inv.data());
  EXPECT_EQ(fp8_row_block_scales(scale_inv.data(), 127, 400), scale_inv.data());
  EXPECT_EQ(fp8_row_block_scales(scale_inv.data(), 128, 400), scale_inv.data() + 4);
  EXPECT_EQ(fp8_row_block_scales(scale_inv.data(), 299, 400), scale_inv.data() + 8);
}

// matvec: one pool thread vs three, bit for bit; each row equals its kernel call; the result
// matches the reference matvec (and so dequantize_fp8_block_scaled's blocks) within tolerance.
TEST(Fp8Matvec, ThreadsAreBitIdenticalAndRowsMatch) {
  ThreadPool pool3(3);
  std::vector<CpuIsa> isas = simd_isas();
  isas.insert(isas.begin(), CpuIsa::kScalar);
  std::mt19937 rng(3);
  for (const int64_t cols : {int64_t(301), int64_t(512)}) {
    for (const int64_t rows : {int64_t(1), int64_t(3), int64_t(130), int64_t(257)}) {
      const std::vector<uint8_t> w = random_fp8(rows * cols, rng);
      const std::vector<float> scale_inv =
          random_scales(n_blocks(rows, 128) * n_blocks(cols, 128), rng);
      const std::vector<float> x = random_activations(cols, rng);
      std::vector<float> reference(static_cast<size_t>(rows));  // [rows]
      matvec_fp8_e4m3_block_scaled_reference(w.data(), scale_inv.data(), x.data(), reference.data(),
                                             rows, cols);
      for (const CpuIsa isa : isas) {
        std::vector<float> single(static_cast<size_t>(rows)), multi(static_cast<size_t>(rows));
        cpu::matvec_fp8_e4m3_block_scaled(w.data(), scale_inv.data(), x.data(), single.data(), rows,
                                          cols, nullptr, isa);
        cpu::matvec_fp8_e4m3_block_scaled(w.data(), scale_inv.data(), x.data(), multi.data(), rows,
                                          cols, &pool3, isa);
        ASSERT_EQ(std::memcmp(single.data(), multi.data(), single.size() * sizeof(float)), 0)
            << cpu::isa_name(isa) << " rows " << rows << " cols " << cols;
        const cpu::Fp8DotFn dot = cpu::fp8_e4m3_dot_kernel(isa).fn;
        for (int64_t r = 0; r < rows; ++r) {
          const float* scales = fp8_row_block_scales(scale_inv.data(), r, cols);
          ASSERT_EQ(single[size_t(r)], dot(w.data() + r * cols, scales, x.data(), cols, 128))
              << cpu::isa_name(isa) << " row " << r;
          const std::vector<uint8_t> row(w.begin() + r * cols, w.begin() + (r + 1) * cols);
          const std::vector<float> row_scales(scales, scales + n_blocks(cols, 128));
          const ExactDot exact = exact_dot(row, row_scales, x, 128);
          EXPECT_LE(std::fabs(double(single[size_t(r)]) - double(reference[size_t(r)])),
                    kKernelTolerance * exact.magnitude)
              << cpu::isa_name(isa) << " row " << r;
        }
      }
    }
  }
}

TEST(Fp8Matvec, RefusesBadShapes) {
  const uint8_t w[4] = {};
  const float s[1] = {1.0f};
  const float x[4] = {};
  float y[1];
  EXPECT_THROW(cpu::matvec_fp8_e4m3_block_scaled(w, s, x, y, -1, 4, nullptr), Error);
  EXPECT_THROW(cpu::matvec_fp8_e4m3_block_scaled(w, s, x, y, 1, -4, nullptr), Error);
}

}  // namespace
}  // namespace sluice::test
