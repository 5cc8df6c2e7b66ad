// What the device tests of expert selection share (cuda_expert_matmul_test.cpp: probabilities;
// cuda_expert_scoring_test.cpp: the other scorings): a device buffer read back, and
// cuda::select_experts run on host rows with its outputs poisoned first (-1 ids, NaN weights),
// so a choice or weight the kernel never wrote cannot pass.
#pragma once

#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/expert_matmul.h"
#include "backend/expert_selection.h"

namespace sluice::test {

template <class T>
std::vector<T> download(const cuda::DeviceBuffer& buffer, const cuda::Stream& stream) {
  std::vector<T> out(buffer.size() / sizeof(T));
  cuda::copy_to_host(out.data(), buffer.data(), buffer.size(), stream);
  stream.synchronize();
  return out;
}

struct DeviceChoices {
  std::vector<int32_t> selected;  // [n_tokens, k]
  std::vector<float> weights;     // [n_tokens, k]
};

// rows [n_tokens, n_expert], bias [n_expert] or empty. Call through ASSERT_NO_FATAL_FAILURE.
inline void select_on_device(const std::vector<float>& rows, const std::vector<float>& bias,
                             int64_t n_tokens, const ExpertSelection& s, DeviceChoices& out) {
  cuda::Stream stream;
  const size_t chosen = size_t(n_tokens * s.n_expert_used);
  cuda::DeviceBuffer rows_dev(rows.size() * sizeof(float)),
      bias_dev(std::max<size_t>(bias.size(), 1) * sizeof(float)),
      selected_dev(chosen * sizeof(int32_t)), weights_dev(chosen * sizeof(float));
  cuda::copy_to_device(rows_dev.data(), rows.data(), rows.size() * sizeof(float), stream);
  if (!bias.empty()) {
    cuda::copy_to_device(bias_dev.data(), bias.data(), bias.size() * sizeof(float), stream);
  }
  cuda::fill_bytes(selected_dev.data(), 0xff, selected_dev.size(), stream);  // poison: -1 ids
  cuda::fill_bytes(weights_dev.data(), 0xff, weights_dev.size(), stream);    // NaN
  std::string error;
  ASSERT_TRUE(cuda::select_experts(
      rows_dev.as<float>(), bias.empty() ? nullptr : bias_dev.as<float>(), n_tokens, s,
      selected_dev.as<int32_t>(), weights_dev.as<float>(), stream.handle(), &error))
      << error;
  out.selected = download<int32_t>(selected_dev, stream);
  out.weights = download<float>(weights_dev, stream);
}

}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
