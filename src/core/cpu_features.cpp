// Reads CPUID once through __builtin_cpu_supports; the result is immutable afterwards.
#include "core/cpu_features.h"

#include <cpuid.h>

namespace sluice {
namespace {

CpuFeatures detect() {
  __builtin_cpu_init();
  CpuFeatures features;
  features.avx2 = __builtin_cpu_supports("avx2");
  features.fma = __builtin_cpu_supports("fma");
  // clang before 16 has no "f16c" for __builtin_cpu_supports: read CPUID leaf 1, ECX bit 29.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  features.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  features.avx512f = __builtin_cpu_supports("avx512f");
  features.avx512bw = __builtin_cpu_supports("avx512bw");
  features.avx512vl = __builtin_cpu_supports("avx512vl");
  features.avx512dq = __builtin_cpu_supports("avx512dq");
  features.avx512vnni = __builtin_cpu_supports("avx512vnni");
  return features;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string text;
  auto add = [&](bool present, const char* name) {
    if (!present) return;
    if (!text.empty()) text += ' ';
    text += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512vnni, "avx512vnni");
  return text.empty() ? "scalar" : text;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace sluice
