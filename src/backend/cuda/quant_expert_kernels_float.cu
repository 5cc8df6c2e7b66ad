// The routed experts' kernels for the plain float weight types, instantiated in a file of their own
// so nvcc builds the families in parallel.
#include "backend/cuda/quant_expert_kernels.cuh"

namespace sluice::cuda::quant {

const ExpertKernelSet* expert_kernel_set_float(QType type) {
  return FloatFamily::find<MakeExpertKernelSet>(type);
}

}  // namespace sluice::cuda::quant
