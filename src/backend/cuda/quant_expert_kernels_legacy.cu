// The routed experts' kernels for the 32-element block types.
// One file per family so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_legacy(QType type) {
  static constexpr ExpertKernelSet kQ4_0 = expert_kernel_set_of<QType::Q4_0>();
  static constexpr ExpertKernelSet kQ4_1 = expert_kernel_set_of<QType::Q4_1>();
  static constexpr ExpertKernelSet kQ5_0 = expert_kernel_set_of<QType::Q5_0>();
  static constexpr ExpertKernelSet kQ5_1 = expert_kernel_set_of<QType::Q5_1>();
  static constexpr ExpertKernelSet kQ8_0 = expert_kernel_set_of<QType::Q8_0>();
  static constexpr ExpertKernelSet kIQ4_NL = expert_kernel_set_of<QType::IQ4_NL>();
  static constexpr ExpertKernelSet kMXFP4 = expert_kernel_set_of<QType::MXFP4>();
  switch (type) {
    case QType::Q4_0:
      return &kQ4_0;
    case QType::Q4_1:
      return &kQ4_1;
    case QType::Q5_0:
      return &kQ5_0;
    case QType::Q5_1:
      return &kQ5_1;
    case QType::Q8_0:
      return &kQ8_0;
    case QType::IQ4_NL:
      return &kIQ4_NL;
    case QType::MXFP4:
      return &kMXFP4;
    default:
      return nullptr;
  }
}

}  // namespace sluice::cuda::quant
