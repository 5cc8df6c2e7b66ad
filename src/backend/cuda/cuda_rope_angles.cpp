// CpuRopeAngles: the CPU's RoPE angles as device tables (see the header).
#include "backend/cuda/cuda_rope_angles.h"

#include <algorithm>

#include "backend/cpu/rope_angles.h"

namespace sluice::cuda {
namespace {

bool same_angles(const RopeConfig& a, const std::vector<float>& a_factors, const RopeConfig& b) {
  if (a.n_rot != b.n_rot || a.freq_base != b.freq_base || a.freq_scale != b.freq_scale ||
      a.ext_factor != b.ext_factor || a.attn_factor != b.attn_factor ||
      a.beta_fast != b.beta_fast || a.beta_slow != b.beta_slow || a.n_ctx_orig != b.n_ctx_orig ||
      a_factors.empty() != (b.freq_factors == nullptr)) {
    return false;
  }
  return a_factors.empty() || std::equal(a_factors.begin(), a_factors.end(), b.freq_factors);
}

}  // namespace

int64_t CpuRopeAngles::index_of(const RopeConfig& config) const {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (same_angles(tables_[i].config, tables_[i].freq_factors, config)) return int64_t(i);
  }
  return -1;
}

const float* CpuRopeAngles::find(const RopeConfig& config, int64_t end) const {
  const int64_t i = index_of(config);
  if (i < 0 || end > tables_[size_t(i)].positions) return nullptr;
  return tables_[size_t(i)].angles.as<float>();
}

const float* CpuRopeAngles::grow(const RopeConfig& config, int64_t end) {
  int64_t i = index_of(config);
  if (i < 0) {
    Table t;
    t.config = config;
    if (config.freq_factors != nullptr) {
      t.freq_factors.assign(config.freq_factors, config.freq_factors + config.n_rot / 2);
    }
    t.config.freq_factors = nullptr;
    tables_.push_back(std::move(t));
    i = int64_t(tables_.size()) - 1;
  }
  Table& t = tables_[size_t(i)];
  int64_t positions = std::max<int64_t>(t.positions, 4096);
  while (positions < end) positions *= 2;
  RopeConfig host = config;
  host.freq_factors = t.freq_factors.empty() ? nullptr : t.freq_factors.data();
  const cpu::RopeAngleConstants constants = cpu::rope_angle_constants(host);
  const int64_t half = config.n_rot / 2;
  std::vector<float> values(size_t(positions * half * 2));
  std::vector<float> cos_row(static_cast<size_t>(half)), sin_row(static_cast<size_t>(half));
  for (int64_t pos = 0; pos < positions; ++pos) {
    cpu::rope_angles(host, constants, pos, cos_row.data(), sin_row.data());
    for (int64_t i = 0; i < half; ++i) {
      values[size_t((pos * half + i) * 2)] = cos_row[size_t(i)];
      values[size_t((pos * half + i) * 2 + 1)] = sin_row[size_t(i)];
    }
  }
  stream_.synchronize();  // kernels queued before may still read the old table
  t.angles = DeviceBuffer(values.size() * sizeof(float));
  copy_to_device(t.angles.data(), values.data(), values.size() * sizeof(float), stream_);
  stream_.synchronize();  // `values` is freed on return
  t.positions = positions;
  return t.angles.as<float>();
}

}  // namespace sluice::cuda
