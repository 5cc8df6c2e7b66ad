// The routed experts' kernels for the K-quant super-block types, instantiated in a file of their
// own so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_k(QType type) {
  return KFamily::find<MakeExpertKernelSet>(type);
}

}  // namespace sluice::cuda::quant
