// The routed experts' kernels for the IQ grid types and IQ4_XS, instantiated in a file of their own
// so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_iq(QType type) {
  return IqFamily::find<MakeExpertKernelSet>(type);
}

}  // namespace sluice::cuda::quant
