// Calibration: the rates the device planner (experts/device_planner.h) chooses by — the host to
// device copy rate and the CPU's expert matvec rate for a weight type — measured once per
// machine and kept in a small JSON file ($SLUICE_CALIBRATION_FILE, else
// $XDG_CACHE_HOME/sluice/calibration.json, else ~/.cache/sluice/calibration.json), keyed by the
// device, the thread count and the type. A file that cannot be read or written is ignored (the
// rates are then measured again next time); it never stops a model from loading.
#pragma once

#include <functional>
#include <string>

#include "core/thread_pool.h"
#include "quant/qtype.h"

namespace sluice {

struct CalibratedRates {
  double h2d_bytes_per_s = 0;
  double cpu_bytes_per_s = 0;
  std::string file;  // where they were kept, for --explain
  bool measured_now = false;
};

// The rates for (device, pool threads, expert_type): from the file, else measured (measure_h2d
// for the copy; the CPU's with a matrix of that type on `pool`) and saved.
CalibratedRates calibrated_rates(const std::string& device, QType expert_type, ThreadPool& pool,
                                 const std::function<double()>& measure_h2d);

// The CPU's matvec rate on a 64 MiB matrix of `type` (bytes of weights per second, one token).
double measure_cpu_matvec_bytes_per_s(QType type, ThreadPool& pool);

std::string calibration_file_path();

}  // namespace sluice
