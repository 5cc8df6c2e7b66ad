// Calibration: the rates are measured once and then read from the file, per device, thread
// count and type; a damaged file is measured over, never an error.
#include "runtime/calibration.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace sluice
