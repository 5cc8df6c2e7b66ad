// Calibration: measure once, keep in a JSON file.
#include "runtime/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_array.h"
#include "backend/cpu/cpu_backend.h"
#include "io/output_file.h"

namespace sluice {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// 2: the CPU's rate from DRAM (before: a 64 MiB matrix, L3-resident on large-cache hosts) and
// the device's matvec rate. Entries without it are measured over.
constexpr int kMethod = 2;

// The best of 5 timed runs of `run` after one untimed (pages faulted in, kernels loaded).
double best_seconds(const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point start = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// A matrix of `type` with 4096 columns and about `bytes` bytes: its row count (0: no such type).
int64_t rows_for(QType type, uint64_t bytes, uint64_t* row) {
  *row = row_bytes(type, 4096).value_or(0);
  return *row == 0 ? 0 : int64_t(bytes / *row);
}

Json read_entries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Json::array();
  try {
    Json json = Json::parse(in);
    if (json.is_object() && json.contains("entries") && json["entries"].is_array()) {
      return json["entries"];
    }
  } catch (const Json::exception&) {
  }
  return Json::array();  // unreadable: measured again and rewritten
}

void write_entries(const std::string& path, const Json& entries) {
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    OutputFile out(path);
    const std::string text = Json{{"entries", entries}}.dump(1) + "\n";
    out.write(text.data(), text.size());
    out.commit();
  } catch (const std::exception&) {
    // A read-only home or full disk: the rates are measured again next time.
  }
}

}  // namespace

std::string calibration_file_path() {
  if (const char* file = std::getenv("SLUICE_CALIBRATION_FILE"); file && *file) return file;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) {
    return std::string(cache) + "/sluice/calibration.json";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/sluice/calibration.json";
}

uint64_t last_level_cache_bytes() {
  uint64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    largest = std::max(largest, value);
  }
  return largest;
}

double measure_cpu_matvec_bytes_per_s(QType type, ThreadPool& pool) {
  constexpr uint64_t kMin = uint64_t(64) << 20, kMax = uint64_t(1) << 30;
  const uint64_t llc = last_level_cache_bytes();
  const uint64_t working_set = std::clamp(llc > 0 ? 2 * llc : kMax / 2, kMin, kMax);
  uint64_t row = 0;
  const int64_t rows = rows_for(type, working_set, &row);
  if (rows == 0) return 0;
  // Any bytes time the same; a fixed pattern keeps the half-float scales finite.
  std::vector<uint8_t> weights(size_t(row * uint64_t(rows)), 0x11);
  std::vector<float> x(4096, 0.5f);
  std::vector<float> y(static_cast<size_t>(rows));
  cpu::CpuBackend cpu(&pool);
  const MatrixView w{type, weights.data(), 4096, rows};
  return double(weights.size()) / best_seconds([&] { cpu.matmul(w, x.data(), y.data(), 1); });
}

double measure_backend_matvec_bytes_per_s(Backend& backend, QType type, uint64_t size) {
  uint64_t row = 0;
  const int64_t rows = rows_for(type, size, &row);
  if (rows == 0) return 0;
  const size_t bytes = size_t(row * uint64_t(rows));
  BackendArray<uint8_t> weights(backend, bytes);
  BackendArray<float> x(backend, 4096), y(backend, size_t(rows));
  {
    const std::vector<uint8_t> pattern(bytes, 0x11);
    const std::vector<float> input(4096, 0.5f);
    backend.upload(weights.data(), pattern.data(), bytes);
    backend.upload(x.data(), input.data(), input.size() * sizeof(float));
  }
  const MatrixView w{type, weights.data(), 4096, rows};
  return double(bytes) / best_seconds([&] {
           backend.matmul(w, x.data(), y.data(), 1);
           backend.synchronize();
         });
}

CalibratedRates calibrated_rates(const std::string& device, QType expert_type, ThreadPool& pool,
                                 const std::function<double()>& measure_h2d,
                                 const std::function<double()>& measure_device) {
  CalibratedRates rates;
  rates.file = calibration_file_path();
  const Json key = {{"device", device},
                    {"threads", pool.size()},
                    {"expert_type", std::string(qtype_name(expert_type))},
                    {"method", kMethod}};
  Json entries = read_entries(rates.file);
  for (const Json& entry : entries) {
    if (entry.value("device", "") == key["device"] && entry.value("threads", 0) == pool.size() &&
        entry.value("expert_type", "") == key["expert_type"] &&
        entry.value("method", 0) == kMethod && entry.value("h2d_bytes_per_s", 0.0) > 0 &&
        entry.value("cpu_bytes_per_s", 0.0) > 0) {
      rates.h2d_bytes_per_s = entry["h2d_bytes_per_s"];
      rates.cpu_bytes_per_s = entry["cpu_bytes_per_s"];
      rates.device_bytes_per_s = entry.value("device_bytes_per_s", 0.0);
      return rates;
    }
  }
  rates.h2d_bytes_per_s = measure_h2d();
  rates.cpu_bytes_per_s = measure_cpu_matvec_bytes_per_s(expert_type, pool);
  try {
    rates.device_bytes_per_s = measure_device ? measure_device() : 0;
  } catch (const std::exception&) {
    // A device that cannot run the measurement (memory, a type it lacks): its rate stays
    // unknown and the planner counts no device time; the model still loads.
    rates.device_bytes_per_s = 0;
  }
  rates.measured_now = true;
  Json entry = key;
  entry["h2d_bytes_per_s"] = rates.h2d_bytes_per_s;
  entry["cpu_bytes_per_s"] = rates.cpu_bytes_per_s;
  entry["device_bytes_per_s"] = rates.device_bytes_per_s;
  entries.push_back(entry);
  write_entries(rates.file, entries);
  return rates;
}

}  // namespace sluice
