// Kernels for the K-quant super-block types, instantiated in a file of their own so nvcc builds the
// families in parallel.
#include "backend/cuda/quant_kernels.cuh"

namespace sluice::cuda::quant {

const KernelSet* kernel_set_k(QType type) {
  return KFamily::find<MakeKernelSet>(type);
}

}  // namespace sluice::cuda::quant
