// Kernels for the plain float weight types, instantiated in a file of their own so nvcc builds the
// families in parallel.
#include "backend/cuda/quant_kernels.cuh"

namespace sluice::cuda::quant {

const KernelSet* kernel_set_float(QType type) {
  return FloatFamily::find<MakeKernelSet>(type);
}

}  // namespace sluice::cuda::quant
