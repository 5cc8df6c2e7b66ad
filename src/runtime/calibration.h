// Calibration: the rates the device planner (experts/device_planner.h) chooses by — the host to
// device copy rate, and the CPU's and the device's matvec rates for a weight type — measured once
// per machine and kept in a small JSON file ($SLUICE_CALIBRATION_FILE, else
// $XDG_CACHE_HOME/sluice/calibration.json, else ~/.cache/sluice/calibration.json), keyed by the
// device, the thread count and the type. A file that cannot be read or written is ignored (the
// rates are then measured again next time); it never stops a model from loading.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "quant/qtype.h"

namespace sluice {

struct CalibratedRates {
  double h2d_bytes_per_s = 0;
  double cpu_bytes_per_s = 0;
  double device_bytes_per_s = 0;  // 0: not measured (no device, or no measure given)
  std::string file;               // where they were kept, for --explain
  bool measured_now = false;
};

// The rates for (device, pool threads, expert_type): from the file, else measured (measure_h2d
// for the copy, measure_device — may be empty — for the device's matvec; the CPU's with a matrix
// of that type on `pool`) and saved. Entries of an older measuring method are measured over.
CalibratedRates calibrated_rates(const std::string& device, QType expert_type, ThreadPool& pool,
                                 const std::function<double()>& measure_h2d,
                                 const std::function<double()>& measure_device = {});

// The CPU's matvec rate on a matrix of `type` twice the size of the last-level cache (64 MiB to
// 1 GiB): the weights come from DRAM, as a hybrid placement's experts do — a 64 MiB matrix sits
// in the 300 MiB L3 of the H200 machine's host and measured L3, not DRAM (bytes of weights per
// second, one token).
double measure_cpu_matvec_bytes_per_s(QType type, ThreadPool& pool);

// The same on `backend` (a GPU's): a matrix of `type` of about `bytes` in its memory (256 MiB:
// 5× an H200's L2).
double measure_backend_matvec_bytes_per_s(Backend& backend, QType type,
                                          uint64_t bytes = uint64_t(256) << 20);

// Bytes of the last-level CPU cache (sysfs), 0 when unknown.
uint64_t last_level_cache_bytes();

std::string calibration_file_path();

}  // namespace sluice
