// Kernels for the IQ grid types and IQ4_XS, instantiated in a file of their own so nvcc builds the
// families in parallel.
#include "backend/cuda/quant_kernels.cuh"

namespace sluice::cuda::quant {

const KernelSet* kernel_set_iq(QType type) {
  return IqFamily::find<MakeKernelSet>(type);
}

}  // namespace sluice::cuda::quant
