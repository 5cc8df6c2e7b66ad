// What the running CPU can execute, read once from CPUID (through the compiler's builtins, which
// also check that the OS saves the wide registers). Kernels compiled for AVX2 or AVX-512 are
// chosen at run time from this; the scalar reference always works.
#pragma once

#include <string>

namespace sluice {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;

  bool has_avx2_set() const { return avx2 && fma && f16c; }
  bool has_avx512_set() const {
    return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq;
  }
  std::string describe() const;  // "avx2 fma f16c avx512f ..."
};

const CpuFeatures& cpu_features();

}  // namespace sluice
