// Kernels for the 32-element block types, instantiated in a file of their own so nvcc builds the
// families in parallel.
#include "backend/cuda/quant_kernels.cuh"

namespace sluice::cuda::quant {

const KernelSet* kernel_set_legacy(QType type) {
  return LegacyFamily::find<MakeKernelSet>(type);
}

}  // namespace sluice::cuda::quant
