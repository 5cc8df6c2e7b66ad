// --cpu-rounding's RoPE angles: per RoPE configuration, a device table of the cos / sin the CPU
// backend turns each position's pairs by (backend/cpu/rope_angles.h, glibc's cosf / sinf), which
// the rope kernels read instead of computing their own (RopeConstants::cpu_angles). The device's
// cos / sin, evaluated in double and rounded, differ from glibc's in the last bit of some
// angles, and that bit reaches the greedy path. Host code.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_memory.h"

namespace sluice::cuda {

class CpuRopeAngles {
 public:
  explicit CpuRopeAngles(const Stream& stream) : stream_(stream) {}

  // The table of `config` (host freq_factors) covering positions [0, end): [position][n_rot / 2]
  // pairs of (cos, sin) floats in device memory; nullptr when there is none that long yet.
  const float* find(const RopeConfig& config, int64_t end) const;
  // Makes it (positions in powers of two from 4096), replacing a shorter one: waits for the
  // stream first, since queued kernels may read the old one, and for the upload.
  const float* grow(const RopeConfig& config, int64_t end);

 private:
  struct Table {
    RopeConfig config;
    std::vector<float> freq_factors;  // the config's, copied: the key compares values
    int64_t positions = 0;
    DeviceBuffer angles;
  };
  // Which table holds config's angles; -1 when none was made yet.
  int64_t index_of(const RopeConfig& config) const;

  const Stream& stream_;
  std::vector<Table> tables_;
};

}  // namespace sluice::cuda
