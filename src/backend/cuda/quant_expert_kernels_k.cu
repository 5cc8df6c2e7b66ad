// The routed experts' kernels for the K-quant super-block types.
// One file per family so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_k(QType type) {
  static constexpr ExpertKernelSet kQ2_K = expert_kernel_set_of<QType::Q2_K>();
  static constexpr ExpertKernelSet kQ3_K = expert_kernel_set_of<QType::Q3_K>();
  static constexpr ExpertKernelSet kQ4_K = expert_kernel_set_of<QType::Q4_K>();
  static constexpr ExpertKernelSet kQ5_K = expert_kernel_set_of<QType::Q5_K>();
  static constexpr ExpertKernelSet kQ6_K = expert_kernel_set_of<QType::Q6_K>();
  switch (type) {
    case QType::Q2_K:
      return &kQ2_K;
    case QType::Q3_K:
      return &kQ3_K;
    case QType::Q4_K:
      return &kQ4_K;
    case QType::Q5_K:
      return &kQ5_K;
    case QType::Q6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace sluice::cuda::quant
