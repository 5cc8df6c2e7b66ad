// The routed experts' kernels for the 32-element block types, instantiated in a file of their own
// so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_legacy(QType type) {
  return LegacyFamily::find<MakeExpertKernelSet>(type);
}

}  // namespace sluice::cuda::quant
