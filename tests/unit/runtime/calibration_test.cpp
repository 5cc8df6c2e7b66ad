// Calibration: the rates are measured once and then read from the file, per device, thread
// count and type; a damaged file is measured over, never an error.
#include "runtime/calibration.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "backend/cpu/cpu_backend.h"

namespace sluice {
namespace {

class CalibrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("sluice_calibration_" + std::to_string(::getpid())) / "calibration.json")
                .string();
    setenv("SLUICE_CALIBRATION_FILE", path_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("SLUICE_CALIBRATION_FILE");
    std::filesystem::remove_all(std::filesystem::path(path_).parent_path());
  }
  std::string path_;
  ThreadPool pool_{1};
};

TEST_F(CalibrationTest, MeasuresOnceThenReadsTheFile) {
  int copies = 0;
  const auto h2d = [&] {
    ++copies;
    return 25e9;
  };
  const CalibratedRates first = calibrated_rates("GPU A", QType::Q4_K, pool_, h2d);
  EXPECT_TRUE(first.measured_now);
  EXPECT_EQ(first.file, path_);
  EXPECT_EQ(first.h2d_bytes_per_s, 25e9);
  EXPECT_GT(first.cpu_bytes_per_s, 1e6);
  const CalibratedRates again = calibrated_rates("GPU A", QType::Q4_K, pool_, h2d);
  EXPECT_FALSE(again.measured_now);
  EXPECT_EQ(again.cpu_bytes_per_s, first.cpu_bytes_per_s);
  EXPECT_EQ(copies, 1);
  EXPECT_TRUE(calibrated_rates("GPU B", QType::Q4_K, pool_, h2d).measured_now);
  EXPECT_TRUE(calibrated_rates("GPU A", QType::Q8_0, pool_, h2d).measured_now);
  EXPECT_EQ(copies, 3);
}

TEST_F(CalibrationTest, ADamagedFileIsMeasuredOver) {
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
  std::ofstream(path_) << "{ not json";
  const CalibratedRates rates = calibrated_rates("GPU A", QType::Q4_K, pool_, [] { return 1e10; });
  EXPECT_TRUE(rates.measured_now);
  EXPECT_FALSE(calibrated_rates("GPU A", QType::Q4_K, pool_, [] { return 2e10; }).measured_now);
}

TEST_F(CalibrationTest, KeepsTheDeviceRateAndMeasuresOlderEntriesOver) {
  // An entry of the first method (its CPU rate from a cache-resident matrix) is not trusted.
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
  std::ofstream(path_) << R"({"entries": [{"device": "GPU A", "threads": 1, "expert_type": "Q4_K",
                             "h2d_bytes_per_s": 1e10, "cpu_bytes_per_s": 1e11}]})";
  int devices = 0;
  const auto device = [&] {
    ++devices;
    return 2e12;
  };
  const CalibratedRates first = calibrated_rates(
      "GPU A", QType::Q4_K, pool_, [] { return 3e10; }, device);
  EXPECT_TRUE(first.measured_now);
  EXPECT_EQ(first.h2d_bytes_per_s, 3e10);
  EXPECT_EQ(first.device_bytes_per_s, 2e12);
  const CalibratedRates again = calibrated_rates(
      "GPU A", QType::Q4_K, pool_, [] { return 3e10; }, device);
  EXPECT_FALSE(again.measured_now);
  EXPECT_EQ(again.device_bytes_per_s, 2e12);
  EXPECT_EQ(devices, 1);
}

TEST_F(CalibrationTest, ADeviceMeasureThatFailsLeavesItsRateUnknown) {
  const CalibratedRates rates = calibrated_rates(
      "GPU A", QType::Q4_K, pool_, [] { return 3e10; },
      []() -> double { throw std::runtime_error("out of device memory"); });
  EXPECT_EQ(rates.device_bytes_per_s, 0.0);
  EXPECT_GT(rates.cpu_bytes_per_s, 1e6);
}

// The device's rate is measured through the Backend interface; the CPU backend stands in.
TEST_F(CalibrationTest, MeasuresABackendsMatvec) {
  cpu::CpuBackend cpu(&pool_);
  EXPECT_GT(measure_backend_matvec_bytes_per_s(cpu, QType::Q8_0, uint64_t(16) << 20), 1e6);
}

}  // namespace
}  // namespace sluice
