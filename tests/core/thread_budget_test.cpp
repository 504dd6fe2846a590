// One thread budget per process (core/runtime/threads.h): threads that run
// forwards at the same time (the GUI's engine and a compression job) split
// it instead of each starting a full OpenMP team; a lone thread gets all of
// it; bad KVSCOPE_THREADS / --threads values fall back or fail clearly.
#include <gtest/gtest.h>
#include <omp.h>
#include <torch/types.h>

#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/compress/compression_lab.h"
#include "core/error.h"
#include "core/runtime/threads.h"
#include "session_test_support.h"

namespace kvscope {
namespace {

using testing_support::fixtureModel;

// OS threads of this process.
int processThreads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// The OpenMP team this thread's next kernel would get.
int teamOfNextKernel() {
  std::atomic<int> team{0};
  at::parallel_for(0, 1 << 16, 1, [&](int64_t, int64_t) { team = omp_get_num_threads(); });
  return team.load();
}

// Restores the budget the other tests run with.
struct BudgetRestorer {
  ThreadChoice saved = threadBudget();
  ~BudgetRestorer() { setThreadBudget(saved); }
};

at::Tensor ids(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kInt64); }

TEST(ThreadBudget, LoneThreadGetsTheWholeBudget) {
  BudgetRestorer restore;
  setThreadBudget({4, false, "test"});
  const auto model = fixtureModel("llama-tiny");
  int team = 0;
  std::thread engine([&] {
    c10::InferenceMode guard;
    model->forward(ids({1, 2, 3}), 0, nullptr);
    team = teamOfNextKernel();
  });
  engine.join();
  EXPECT_EQ(team, 4);
}

// The GUI's engine thread steps a session while a compression job runs on a
// thread of its own: together they must stay within the one budget (4 here),
// in team sizes and in OS threads. Each starting a full pool gives teams of
// 4 + 4 and 2 + 2 * 3 new threads.
TEST(ThreadBudget, EngineAndCompressionThreadsShareOneBudget) {
  BudgetRestorer restore;
  const int budget = 4;
  setThreadBudget({budget, false, "test"});
  const auto model = fixtureModel("llama-tiny");
  const int threads_before = processThreads();

  std::mutex mutex;
  std::condition_variable changed;
  bool engine_running = false, compression_done = false, counted = false;
  int engine_team = 0, compression_team = 0, threads_during = 0;
  std::string compression_error;

  std::thread engine([&] {
    c10::InferenceMode guard;
    auto cache = model->makeCache();
    model->forward(ids({1, 2, 3, 4}), 0, cache.get());
    {
      std::lock_guard<std::mutex> lock(mutex);
      engine_running = true;
    }
    changed.notify_all();
    // Decode steps until the compression job has finished.
    int64_t position = 4;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (compression_done) break;
      }
      if (position + 1 >= model->config().contextLength()) {
        cache = model->makeCache();
        position = 0;
      }
      model->forward(ids({5}), position++, cache.get());
    }
    engine_team = teamOfNextKernel();
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return counted; });
  });

  std::thread compression([&] {
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return engine_running; });
    }
    try {
      CompressionInput input;
      input.prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
      input.max_new = 6;
      (void)runCompressionLab(*model, input, CompressionSpec::evicting(EvictionPolicy::Knorm, 0.5));
    } catch (const std::exception& error) {
      compression_error = error.what();
    }
    compression_team = teamOfNextKernel();
    {
      std::lock_guard<std::mutex> lock(mutex);
      compression_done = true;
    }
    changed.notify_all();
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return counted; });
  });

  // Both threads are alive with their pools; count once both have run their
  // last kernel (threads a shrinking team lets go exit on their own: wait, up
  // to 10 s: on a loaded machine they took more than the 2 s once allowed).
  for (int tries = 0; tries < 500; ++tries) {
    bool ready = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      ready = compression_done && engine_team > 0;
    }
    if (ready) {
      threads_during = processThreads();
      if (threads_during - threads_before <= budget) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    counted = true;
  }
  changed.notify_all();
  engine.join();
  compression.join();

  EXPECT_EQ(compression_error, "");
  EXPECT_GE(engine_team, 1);
  EXPECT_GE(compression_team, 1);
  EXPECT_LE(engine_team + compression_team, budget) << "engine " << engine_team << ", compression " << compression_team;
  // Two calling threads plus their teams' other members.
  EXPECT_LE(threads_during - threads_before, budget)
      << threads_before << " threads before, " << threads_during << " with both at work";
}

TEST(ThreadBudget, ThreadThatStopsGivesItsShareBack) {
  BudgetRestorer restore;
  setThreadBudget({4, false, "test"});
  const auto model = fixtureModel("llama-tiny");
  std::thread gone([&] {
    c10::InferenceMode guard;
    model->forward(ids({1, 2}), 0, nullptr);
  });
  gone.join();  // its thread_local share is returned when it exits
  int team = 0;
  std::thread engine([&] {
    c10::InferenceMode guard;
    model->forward(ids({1, 2}), 0, nullptr);
    team = teamOfNextKernel();
  });
  engine.join();
  EXPECT_EQ(team, 4);
}

TEST(ThreadBudget, EnvironmentChoosesOrFallsBackWithAWarning) {
  std::string warning;
  ThreadChoice c = chooseThreads(nullptr, nullptr, 1, 2, &warning);
  EXPECT_EQ(c.budget, 2);
  EXPECT_TRUE(c.adaptive);
  EXPECT_EQ(warning, "");

  c = chooseThreads("3", nullptr, 1, 2, &warning);
  EXPECT_EQ(c.budget, 3);
  EXPECT_FALSE(c.adaptive);

  c = chooseThreads("auto", "1", 1, 2, &warning);
  EXPECT_EQ(c.budget, 2);
  EXPECT_TRUE(c.adaptive);

  c = chooseThreads(nullptr, "1", 1, 2, &warning);
  EXPECT_EQ(c.budget, 1);
  EXPECT_FALSE(c.adaptive);
  EXPECT_EQ(c.source, "OMP_NUM_THREADS=1");

  for (const char* bad : {"abc", "0", "-2", "100000", "2x", " "}) {
    warning.clear();
    c = chooseThreads(bad, nullptr, 1, 2, &warning);
    EXPECT_EQ(c.budget, 2) << bad;
    EXPECT_TRUE(c.adaptive) << bad;
    EXPECT_NE(warning.find("KVSCOPE_THREADS='" + std::string(bad) + "' is not a thread count"), std::string::npos)
        << warning;
  }
  // A bad KVSCOPE_THREADS leaves OMP_NUM_THREADS in charge.
  c = chooseThreads("abc", "3", 3, 2, &warning);
  EXPECT_EQ(c.budget, 3);
  EXPECT_FALSE(c.adaptive);
}

TEST(ThreadBudget, ThreadsOptionOutOfRangeIsAnError) {
  EXPECT_EQ(checkedThreadCount(1, "--threads"), 1);
  EXPECT_EQ(checkedThreadCount(kMaxThreads, "--threads"), kMaxThreads);
  for (long long bad : {0LL, -1LL, 100000LL}) {
    try {
      checkedThreadCount(bad, "--threads");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("--threads must be a thread count from 1 to"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace kvscope
