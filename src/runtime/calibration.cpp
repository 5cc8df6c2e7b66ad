// Calibration: measure once, keep in a JSON file.
#include "runtime/calibration.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "io/output_file.h"

namespace sluice {
namespace {

using Json = nlohmann::json;

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

double measure_cpu_matvec_bytes_per_s(QType type, ThreadPool& pool) {
  constexpr int64_t kCols = 4096;
  const uint64_t row = row_bytes(type, kCols).value_or(0);
  if (row == 0) return 0;
  const int64_t rows = int64_t((uint64_t(64) << 20) / row);
  // Any bytes time the same; a fixed pattern keeps the half-float scales finite.
  std::vector<uint8_t> weights(size_t(row * uint64_t(rows)), 0x11);
  std::vector<float> x(static_cast<size_t>(kCols), 0.5f);
  std::vector<float> y(static_cast<size_t>(rows));
  cpu::CpuBackend cpu(&pool);
  const MatrixView w{type, weights.data(), kCols, rows};
  cpu.matmul(w, x.data(), y.data(), 1);  // warm-up: pages faulted in
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point start = Clock::now();
    cpu.matmul(w, x.data(), y.data(), 1);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return double(weights.size()) / best;
}

CalibratedRates calibrated_rates(const std::string& device, QType expert_type, ThreadPool& pool,
                                 const std::function<double()>& measure_h2d) {
  CalibratedRates rates;
  rates.file = calibration_file_path();
  const Json key = {{"device", device},
                    {"threads", pool.size()},
                    {"expert_type", std::string(qtype_name(expert_type))}};
  Json entries = read_entries(rates.file);
  for (const Json& entry : entries) {
    if (entry.value("device", "") == key["device"] && entry.value("threads", 0) == pool.size() &&
        entry.value("expert_type", "") == key["expert_type"] &&
        entry.value("h2d_bytes_per_s", 0.0) > 0 && entry.value("cpu_bytes_per_s", 0.0) > 0) {
      rates.h2d_bytes_per_s = entry["h2d_bytes_per_s"];
      rates.cpu_bytes_per_s = entry["cpu_bytes_per_s"];
      return rates;
    }
  }
  rates.h2d_bytes_per_s = measure_h2d();
  rates.cpu_bytes_per_s = measure_cpu_matvec_bytes_per_s(expert_type, pool);
  rates.measured_now = true;
  Json entry = key;
  entry["h2d_bytes_per_s"] = rates.h2d_bytes_per_s;
  entry["cpu_bytes_per_s"] = rates.cpu_bytes_per_s;
  entries.push_back(entry);
  write_entries(rates.file, entries);
  return rates;
}

}  // namespace sluice
