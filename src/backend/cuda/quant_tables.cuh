// Device copies of quant/'s lookup tables (IQ grids, sign patterns, IQ4_NL / MXFP4 values). The
// values are not retyped: they are copied from quant/iq_tables.h once per device, on first use
// (a synchronous host-to-device copy, so do not first use an IQ type inside stream capture).
//
// Without relocatable device code every .cu file holds its own copy of these __device__ arrays,
// so each file that includes this header uploads its own copy (ensure_tables is per file too).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "quant/iq_tables.h"

// A table in device code, quant/'s own array in host code (where a test checks the decoders).
#ifdef __CUDA_ARCH__
#define SLUICE_QTABLE(device_table, host_table) device_table
#else
#define SLUICE_QTABLE(device_table, host_table) host_table
#endif

namespace sluice::cuda::quant {
namespace {

__device__ uint64_t g_iq2xxs_grid[256];
__device__ uint64_t g_iq2xs_grid[512];
__device__ uint64_t g_iq2s_grid[1024];
__device__ uint64_t g_iq1s_grid[2048];
__device__ uint32_t g_iq3xxs_grid[256];
__device__ uint32_t g_iq3s_grid[512];
__device__ uint8_t g_ksigns_iq2xs[128];
__device__ int8_t g_values_iq4nl[16];
__device__ int8_t g_values_mxfp4[16];

constexpr int kMaxDevices = 64;

// Uploads the tables to the current device unless this file already did; false (with *error)
// when a copy fails.
[[maybe_unused]] bool ensure_tables(std::string* error) {
  static std::mutex mutex;
  static bool uploaded[kMaxDevices] = {};
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess && (device < 0 || device >= kMaxDevices)) {
    if (error) *error = "cuda quant tables: device index out of range";
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (status == cudaSuccess && uploaded[device]) return true;
  auto copy = [&](const void* symbol, const void* host, size_t bytes) {
    if (status == cudaSuccess) status = cudaMemcpyToSymbol(symbol, host, bytes);
  };
  copy(g_iq2xxs_grid, kIq2xxsGrid, sizeof(kIq2xxsGrid));
  copy(g_iq2xs_grid, kIq2xsGrid, sizeof(kIq2xsGrid));
  copy(g_iq2s_grid, kIq2sGrid, sizeof(kIq2sGrid));
  copy(g_iq1s_grid, kIq1sGrid, sizeof(kIq1sGrid));
  copy(g_iq3xxs_grid, kIq3xxsGrid, sizeof(kIq3xxsGrid));
  copy(g_iq3s_grid, kIq3sGrid, sizeof(kIq3sGrid));
  copy(g_ksigns_iq2xs, kKsignsIq2xs, sizeof(kKsignsIq2xs));
  copy(g_values_iq4nl, kValuesIq4nl, sizeof(kValuesIq4nl));
  copy(g_values_mxfp4, kValuesMxfp4, sizeof(kValuesMxfp4));
  if (status != cudaSuccess) {
    if (error) *error = std::string("cuda quant tables upload: ") + cudaGetErrorString(status);
    return false;
  }
  uploaded[device] = true;
  return true;
}

}  // namespace
}  // namespace sluice::cuda::quant
