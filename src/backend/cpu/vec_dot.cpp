// Builds the three kernel tables once (scalar from quant/'s reference, then each ISA on top of
// the one below) and answers lookups. Only baseline x86-64 code here; the ISA files are called
// only after isa_supported() has confirmed the CPU runs them.
#include "backend/cpu/vec_dot.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cpu/vec_dot_table.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

struct Tables {
  VecDotTable by_isa[3];  // [CpuIsa]
};

Tables build_tables() {
  Tables tables;
  VecDotTable& scalar = tables.by_isa[int(CpuIsa::kScalar)];
  for (int id = 0; id < kVecDotSlots; ++id) {
    scalar.kernels[id] = {vec_dot_reference_of(QType(id)), CpuIsa::kScalar};
  }
  if (isa_supported(CpuIsa::kAvx2)) {
    VecDotTable& avx2 = tables.by_isa[int(CpuIsa::kAvx2)];
    avx2 = scalar;
    add_avx2_block32_kernels(avx2);
    add_avx2_kquant_kernels(avx2);
    add_avx2_float_kernels(avx2);
    add_avx2_iq_kernels(avx2);
  }
  if (isa_supported(CpuIsa::kAvx512)) {
    VecDotTable& avx512 = tables.by_isa[int(CpuIsa::kAvx512)];
    avx512 = tables.by_isa[int(CpuIsa::kAvx2)];
    add_avx512_block32_kernels(avx512);
    add_avx512_kquant_kernels(avx512);
    add_avx512_float_kernels(avx512);
  }
  return tables;
}

const Tables& tables() {
  static const Tables built = build_tables();
  return built;
}

}  // namespace

std::string_view isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool isa_supported(CpuIsa isa) {
  const CpuFeatures& features = cpu_features();
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return features.has_avx2_set();
    case CpuIsa::kAvx512:
      return features.has_avx512_set() && features.avx512vnni;
  }
  return false;
}

CpuIsa best_isa() {
  static const CpuIsa best = [] {
    const CpuIsa widest = isa_supported(CpuIsa::kAvx512) ? CpuIsa::kAvx512
                          : isa_supported(CpuIsa::kAvx2) ? CpuIsa::kAvx2
                                                         : CpuIsa::kScalar;
    const char* cap = std::getenv("SLUICE_CPU_ISA");
    if (cap == nullptr || *cap == '\0' || std::string_view(cap) == "avx512") return widest;
    if (std::string_view(cap) == "avx2") return std::min(widest, CpuIsa::kAvx2);
    fail("SLUICE_CPU_ISA is '", cap, "': expected avx2 or avx512");
  }();
  return best;
}

VecDotKernel vec_dot_kernel(QType weight, CpuIsa isa) {
  if (!isa_supported(isa)) fail("vec_dot: this CPU cannot run ", isa_name(isa), " kernels");
  const auto id = static_cast<uint32_t>(weight);
  if (id >= uint32_t(kVecDotSlots)) return {};
  return tables().by_isa[int(isa)].kernels[id];
}

VecDotScaledFn vec_dot_scaled_kernel(QType weight) {
  const auto id = static_cast<uint32_t>(weight);
  if (id >= uint32_t(kVecDotSlots)) return nullptr;
  return tables().by_isa[int(best_isa())].kernels[id].scaled;
}

}  // namespace sluice::cpu
