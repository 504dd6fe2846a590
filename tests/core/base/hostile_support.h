#pragma once
// Helpers for the hostile-input tests: every hostile file must be
// refused with a kvscope::Error that names the file and the problem, within
// a second, without a large allocation. The inputs are generated here, never
// committed.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace kvscope::hostile {

// CPU-time and memory budgets every refusal must meet. The memory budget
// is checked against the process's peak RSS, which only a new peak moves:
// an input that made kvscope allocate gigabytes fails it.
#ifdef KVSCOPE_SANITIZE
// ASan + UBSan builds run several times slower: 5.5x on 100,000 tensors'
// header here (0.47 -> 2.6 s, Intel Xeon), which a 5x budget failed under load.
// The budgets catch blow-ups of orders of magnitude, which 8x still does.
constexpr double kTimeScale = 8.0;
#else
constexpr double kTimeScale = 1.0;
#endif
constexpr double kSeconds = 1.0 * kTimeScale;
constexpr long kPeakGrowthKb = 512 * 1024;

// CPU seconds this process has used. The budgets are for work done (a
// quadratic parse, a regex that backtracks): CPU time measures that, while
// wall time also counts whatever else a shared 2-core CI machine is running
// (under ctest -j2 beside builds, wall time ran 2-3x the CPU time).
inline double cpuSeconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

inline long peakRssKb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// "[[[...]]]" n levels deep around `inner`.
inline std::string nestedArrays(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// Runs fn; expects an Error containing every part, within the budgets.
// Returns the message.
// cpu_budget: the refusal's CPU time limit (kSeconds unless the refusal must
// first read a stated amount of input).
inline std::string expectRefused(const std::function<void()>& fn, const std::vector<std::string>& parts,
                                 double cpu_budget = kSeconds) {
  const long peak_before = peakRssKb();
  const double start = cpuSeconds();
  std::string message;
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kvscope::Error: " << e.what();
  }
  const double seconds = cpuSeconds() - start;
  EXPECT_LT(seconds, cpu_budget) << "refusal took " << seconds << " s of CPU: " << message;
  EXPECT_LT(peakRssKb() - peak_before, kPeakGrowthKb) << "peak memory grew by " << (peakRssKb() - peak_before)
                                                      << " kB: " << message;
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing in: " << message;
  return message;
}

// A fresh temp directory per test.
class TempDirTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "kvscope-hostile-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace kvscope::hostile
