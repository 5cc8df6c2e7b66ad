// Host-side view of the CUDA backend that code outside backend/cuda may call without CUDA
// headers (only this folder includes cuda_runtime.h). The kernels arrive with the CUDA backend
// issue; for now this proves the toolchain builds for the target chips and a kernel runs.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no device.
int device_count();

// Name and compute capability of device `index`, e.g. "NVIDIA H200 (sm_90)".
std::string describe_device(int index);

// Host-to-device copy rate of device 0 from pinned memory (256 MiB copies, best of 3), bytes per
// second; 0 when any CUDA call fails.
double measure_host_to_device_bytes_per_s();

// Free and total memory of device `index` in bytes; false when CUDA cannot say.
bool device_memory(int index, uint64_t* free_bytes, uint64_t* total_bytes);

// Runs a kernel writing out[i] = i * scale on device 0 and copies the result back; false
// (with `error` set) when any CUDA call fails. Used by the device smoke test.
bool run_iota_kernel(float scale, float* out, int64_t n, std::string* error);

}  // namespace sluice::cuda
