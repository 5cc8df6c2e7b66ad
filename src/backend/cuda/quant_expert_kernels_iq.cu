// The routed experts' kernels for the IQ grid types and IQ4_XS.
// One file per family so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_iq(QType type) {
  static constexpr ExpertKernelSet kIQ2_XXS = expert_kernel_set_of<QType::IQ2_XXS>();
  static constexpr ExpertKernelSet kIQ2_XS = expert_kernel_set_of<QType::IQ2_XS>();
  static constexpr ExpertKernelSet kIQ2_S = expert_kernel_set_of<QType::IQ2_S>();
  static constexpr ExpertKernelSet kIQ3_XXS = expert_kernel_set_of<QType::IQ3_XXS>();
  static constexpr ExpertKernelSet kIQ3_S = expert_kernel_set_of<QType::IQ3_S>();
  static constexpr ExpertKernelSet kIQ1_S = expert_kernel_set_of<QType::IQ1_S>();
  static constexpr ExpertKernelSet kIQ1_M = expert_kernel_set_of<QType::IQ1_M>();
  static constexpr ExpertKernelSet kIQ4_XS = expert_kernel_set_of<QType::IQ4_XS>();
  switch (type) {
    case QType::IQ2_XXS:
      return &kIQ2_XXS;
    case QType::IQ2_XS:
      return &kIQ2_XS;
    case QType::IQ2_S:
      return &kIQ2_S;
    case QType::IQ3_XXS:
      return &kIQ3_XXS;
    case QType::IQ3_S:
      return &kIQ3_S;
    case QType::IQ1_S:
      return &kIQ1_S;
    case QType::IQ1_M:
      return &kIQ1_M;
    case QType::IQ4_XS:
      return &kIQ4_XS;
    default:
      return nullptr;
  }
}

}  // namespace sluice::cuda::quant
