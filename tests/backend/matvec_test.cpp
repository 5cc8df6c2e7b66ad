// matvec against per-row vec_dot, and multithreaded against single-threaded bit for bit,
// with row counts that are odd, smaller than the thread count, and not multiples of a chunk.
#include "backend/cpu/matvec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant_test_data.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

using cpu::CpuIsa;

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu::isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

TEST(Matvec, ThreadedIsBitIdenticalAndEqualsRowDots) {
  ThreadPool pool4(4);
  ThreadPool pool3(3);
  for (const QType type : dot_weight_types()) {
    const QType act = *activation_type_for(type);
    const int64_t n_cols = traits_of(type).block_size == 1 ? 96 : 512;
    const uint64_t row_size = *row_bytes(type, uint64_t(n_cols));
    std::mt19937 rng(7 + uint32_t(type));
    for (const int64_t n_rows : {1, 3, 37, 130}) {
      const std::vector<uint8_t> w = random_weight_rows(type, n_rows, n_cols, rng);
      const std::vector<uint8_t> x = random_activation_row(act, n_cols, rng);
      for (const CpuIsa isa : supported_isas()) {
        std::vector<float> single(static_cast<size_t>(n_rows)), multi4(static_cast<size_t>(n_rows)),
            multi3(static_cast<size_t>(n_rows));
        cpu::matvec(type, w.data(), x.data(), single.data(), n_rows, n_cols, nullptr, isa);
        cpu::matvec(type, w.data(), x.data(), multi4.data(), n_rows, n_cols, &pool4, isa);
        cpu::matvec(type, w.data(), x.data(), multi3.data(), n_rows, n_cols, &pool3, isa);
        ASSERT_EQ(std::memcmp(single.data(), multi4.data(), single.size() * sizeof(float)), 0)
            << qtype_name(type) << " " << cpu::isa_name(isa) << " rows " << n_rows;
        ASSERT_EQ(std::memcmp(single.data(), multi3.data(), single.size() * sizeof(float)), 0)
            << qtype_name(type) << " " << cpu::isa_name(isa) << " rows " << n_rows;
        const VecDotFn dot = cpu::vec_dot_kernel(type, isa).fn;
        for (int64_t r = 0; r < n_rows; ++r) {
          ASSERT_EQ(single[size_t(r)], dot(w.data() + r * row_size, x.data(), n_cols))
              << qtype_name(type) << " row " << r;
        }
      }
    }
  }
}

TEST(Matvec, RefusesBadShapesAndTypes) {
  std::vector<uint8_t> bytes(4096);
  float y[4];
  EXPECT_THROW(cpu::matvec(QType::Q4_K, bytes.data(), bytes.data(), y, 1, 100, nullptr), Error);
  EXPECT_THROW(cpu::matvec(QType::I8, bytes.data(), bytes.data(), y, 1, 32, nullptr), Error);
}

}  // namespace
}  // namespace sluice::test
