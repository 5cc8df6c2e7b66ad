// The order of a decode product's float operations on the device: its own (kNone), or, under
// --cpu-rounding, that of the CPU backend's kernels for the host's ISA, so that a product of a
// 32-element type is the CPU's bit for bit (quant_int8_cpu_order.cuh). Plain C++.
#pragma once

#include <cstdint>

namespace sluice::cuda {

enum class CpuOrder : uint8_t { kNone, kAvx2, kAvx512 };

// The order of the CPU backend's kernels on this host (backend/cpu/vec_dot.h: best_isa);
// kNone where they are not vectorised (no AVX2).
CpuOrder host_cpu_order();

}  // namespace sluice::cuda
