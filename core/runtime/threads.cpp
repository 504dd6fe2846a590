#include "core/runtime/threads.h"

#include <omp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <torch/types.h>

#include "core/error.h"

namespace kvscope {
namespace {

using Clock = std::chrono::steady_clock;

// A compute thread looks at the budget again after this long of forwards.
constexpr auto kCheckEvery = std::chrono::milliseconds(100);
// Other programs' load is measured over at least this long: /proc/stat counts
// in 10 ms ticks, so 200 ms on 2 cores is 40 ticks, +-2 of them 0.1 core.
constexpr auto kSampleOver = std::chrono::milliseconds(200);
// A thread with no forward for this long gives its share back.
constexpr auto kIdleAfter = std::chrono::milliseconds(500);
// A core counts as taken when other programs kept it busy this much.
constexpr double kTakenFrom = 0.3;

// Busy time of all CPUs (seconds) and the number of running tasks, from
// /proc/stat. Empty when it cannot be read (not Linux, a sandbox).
struct MachineSample {
  double busy_seconds = 0;
  int running = 0;
};

std::optional<MachineSample> readProcStat() {
  std::FILE* file = std::fopen("/proc/stat", "re");
  if (!file) return std::nullopt;
  char line[512];
  MachineSample sample;
  bool have_cpu = false, have_running = false;
  while (std::fgets(line, sizeof line, file)) {
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!have_cpu && std::sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle,
                                 &iowait, &irq, &softirq, &steal) >= 4) {
      static const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
      sample.busy_seconds = static_cast<double>(user + nice + system + irq + softirq + steal) * tick;
      have_cpu = true;
    } else if (std::sscanf(line, "procs_running %d", &sample.running) == 1) {
      have_running = true;
      break;  // after the per-CPU lines and the counters we need
    }
  }
  std::fclose(file);
  if (!have_cpu || !have_running) return std::nullopt;
  return sample;
}

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int onlineCores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

class Budget {
 public:
  Budget() { choice_ = {std::max(1, usableCores()), true, "every core"}; }

  void set(const ThreadChoice& choice) {
    std::lock_guard<std::mutex> lock(mutex_);
    choice_ = choice;
    choice_.budget = std::clamp(choice_.budget, 1, kMaxThreads);
    available_ = 0;  // recomputed at the next check
    active_.clear();  // threads register again at their next forward
    generation_.fetch_add(1, std::memory_order_relaxed);
  }

  ThreadChoice get() {
    std::lock_guard<std::mutex> lock(mutex_);
    return choice_;
  }

  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }

  // Registers the calling thread as computing now and returns its share.
  int share(std::thread::id self, Clock::time_point now, uint64_t* generation_seen) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t before = active_.size();
    active_[self] = now;
    for (auto it = active_.begin(); it != active_.end();) {
      it = now - it->second > kIdleAfter ? active_.erase(it) : std::next(it);
    }
    const int available = choice_.adaptive ? adaptiveAvailable(now, static_cast<int>(active_.size())) : choice_.budget;
    if (available != available_ || active_.size() != before) {
      if (available != available_ && available_ != 0) {
        spdlog::debug("threads: {} -> {} (other programs keep {:.2f} cores busy)", available_, available, others_);
      }
      available_ = available;
      generation_.fetch_add(1, std::memory_order_relaxed);
    }
    *generation_seen = generation_.load(std::memory_order_relaxed);
    return std::max(1, available_ / static_cast<int>(active_.size()));
  }

  // What the process may use now, for threads that have not run a forward yet
  // (model loading runs on them). The caller counts as running.
  int availableNow() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int active = std::max<int>(1, static_cast<int>(active_.size()));
    return choice_.adaptive ? adaptiveAvailable(Clock::now(), active) : choice_.budget;
  }

  void leave(std::thread::id self) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_.erase(self) > 0) generation_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  // The budget minus the cores other programs keep busy (at least 1).
  // `ours_running`: threads of ours that run now (not other programs).
  int adaptiveAvailable(Clock::time_point now, int ours_running) {
    if (!last_ || now - last_when_ >= kSampleOver) {
      const std::optional<MachineSample> sample = readProcStat();
      const double self = processCpuSeconds();
      if (!sample) return choice_.budget;  // no /proc: as before, every core
      if (!last_) {
        // First look: what runs right now besides our computing threads.
        others_ = std::max(0, sample->running - ours_running);
      } else {
        const double wall = std::chrono::duration<double>(now - last_when_).count();
        others_ = std::max(0.0, (sample->busy_seconds - last_->busy_seconds) - (self - last_self_)) / wall;
      }
      last_ = sample;
      last_self_ = self;
      last_when_ = now;
    }
    const int taken = static_cast<int>(std::floor(others_ + (1.0 - kTakenFrom)));
    const int free_cores = std::min(usableCores(), onlineCores() - taken);
    return std::clamp(free_cores, 1, choice_.budget);
  }

  std::mutex mutex_;
  ThreadChoice choice_;
  std::atomic<uint64_t> generation_{1};
  int available_ = 0;  // threads the process may use now (0: not computed yet)
  std::unordered_map<std::thread::id, Clock::time_point> active_;  // threads running forwards, last seen
  std::optional<MachineSample> last_;
  double last_self_ = 0;
  Clock::time_point last_when_{};
  double others_ = 0;  // cores other programs kept busy over the last sample
};

Budget& budget() {
  static Budget* instance = new Budget();  // never destroyed: threads may outlive statics
  return *instance;
}

// What the calling thread last took from the budget.
struct ThreadShare {
  uint64_t generation = 0;
  Clock::time_point next_check{};
  int threads = 0;
  bool registered = false;
  ~ThreadShare() {
    if (registered) budget().leave(std::this_thread::get_id());
  }
};

thread_local ThreadShare this_thread_share;

}  // namespace

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadChoice chooseThreads(const char* kvscope_threads, const char* omp_num_threads, int omp_threads, int cores,
                           std::string* warning) {
  const ThreadChoice every_core{std::clamp(cores, 1, kMaxThreads), true,
                                "every core (" + std::to_string(std::max(cores, 1)) +
                                    "), fewer while other programs hold cores"};
  if (kvscope_threads != nullptr && *kvscope_threads != '\0') {
    const std::string text = kvscope_threads;
    if (text == "auto") return every_core;
    errno = 0;
    char* end = nullptr;
    const long long value = std::strtoll(kvscope_threads, &end, 10);
    if (errno == 0 && end != kvscope_threads && *end == '\0' && value >= 1 && value <= kMaxThreads) {
      return {static_cast<int>(value), false, "KVSCOPE_THREADS=" + text};
    }
    if (warning) {
      *warning = "KVSCOPE_THREADS='" + text + "' is not a thread count (1 to " + std::to_string(kMaxThreads) +
                 ", or auto); ignoring it";
    }
  }
  if (omp_num_threads != nullptr && *omp_num_threads != '\0') {
    return {std::clamp(omp_threads, 1, kMaxThreads), false, "OMP_NUM_THREADS=" + std::string(omp_num_threads)};
  }
  return every_core;
}

int useMachineThreads() {
  std::string warning;
  const ThreadChoice choice = chooseThreads(std::getenv("KVSCOPE_THREADS"), std::getenv("OMP_NUM_THREADS"),
                                            omp_get_max_threads(), usableCores(), &warning);
  if (!warning.empty()) spdlog::warn("{}", warning);
  spdlog::info("threads: {} ({})", choice.budget, choice.source);
  setThreadBudget(choice);
  return choice.budget;
}

void setThreadBudget(const ThreadChoice& choice) {
  budget().set(choice);
  // libtorch's own count, which threads that never ran a forward start with
  // (and this one, which may load models next): the budget, or with an
  // adaptive one what other programs leave of it right now.
  torch::set_num_threads(budget().availableNow());
}

ThreadChoice threadBudget() { return budget().get(); }

int checkedThreadCount(long long value, const std::string& option) {
  if (value < 1 || value > kMaxThreads) {
    throw Error(option + " must be a thread count from 1 to " + std::to_string(kMaxThreads) + ", got " +
                std::to_string(value));
  }
  return static_cast<int>(value);
}

int shareThreadsBeforeForward() {
  ThreadShare& mine = this_thread_share;
  Budget& all = budget();
  const Clock::time_point now = Clock::now();
  if (mine.generation == all.generation() && now < mine.next_check) return mine.threads;
  mine.next_check = now + kCheckEvery;
  mine.registered = true;
  const int threads = all.share(std::this_thread::get_id(), now, &mine.generation);
  if (threads != mine.threads) {
    // libtorch sets a thread's OpenMP count from its global count the first
    // time the thread asks; ask first so that does not undo ours. Then set
    // only this thread's count (torch::set_num_threads would also rebuild
    // libtorch's pthreadpool each time).
    (void)torch::get_num_threads();
    omp_set_num_threads(threads);
    mine.threads = threads;
  }
  return threads;
}

}  // namespace kvscope
