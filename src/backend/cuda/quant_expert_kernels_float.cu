// The routed experts' kernels for the plain float weight types.
// One file per family so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_float(QType type) {
  static constexpr ExpertKernelSet kF32 = expert_kernel_set_of<QType::F32>();
  static constexpr ExpertKernelSet kF16 = expert_kernel_set_of<QType::F16>();
  static constexpr ExpertKernelSet kBF16 = expert_kernel_set_of<QType::BF16>();
  switch (type) {
    case QType::F32:
      return &kF32;
    case QType::F16:
      return &kF16;
    case QType::BF16:
      return &kBF16;
    default:
      return nullptr;
  }
}

}  // namespace sluice::cuda::quant
