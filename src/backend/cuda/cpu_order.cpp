// host_cpu_order: which of the CPU backend's kernel tables this host runs.
#include "backend/cuda/cpu_order.h"

#include "backend/cpu/vec_dot.h"

namespace sluice::cuda {

CpuOrder host_cpu_order() {
  switch (cpu::best_isa()) {
    case cpu::CpuIsa::kAvx512:
      return CpuOrder::kAvx512;
    case cpu::CpuIsa::kAvx2:
      return CpuOrder::kAvx2;
    case cpu::CpuIsa::kScalar:
      break;
  }
  return CpuOrder::kNone;
}

}  // namespace sluice::cuda
