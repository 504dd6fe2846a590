#pragma once
// How many threads the process computes with: one budget per process, shared
// by every thread that runs forwards, and by default smaller while other
// programs hold cores.
//
// Why: libtorch's OpenMP (libgomp) gives each calling OS thread its own team,
// and a parallel region waits for its slowest thread. With one of two cores
// held by another CPU-bound program, a 2-thread team runs every kernel at the
// pace of the thread that shares its core (128 bundled tokens were measured
// at 16.9 s with 2 threads vs 0.63 s with 1; docs/performance-threads.md has
// today's figures). So the default budget is
// every core, and each forward's thread uses budget minus the cores other
// programs kept busy over the last fraction of a second (never below 1),
// divided among this process's threads that are running forwards
// (docs/performance-threads.md).
#include <string>

namespace kvscope {

// Most threads a user may ask for; more is a typo, not a machine.
constexpr int kMaxThreads = 256;

struct ThreadChoice {
  int budget = 1;        // threads the process computes with at most
  bool adaptive = true;  // fewer while other programs hold cores
  std::string source;    // where the budget came from, for logs and reports
};

// What the environment asks for (the variables' values, null when unset).
// KVSCOPE_THREADS: a count 1..kMaxThreads (fixed), or "auto"; else
// OMP_NUM_THREADS set: libgomp has parsed it, its count `omp_threads` is kept
// (fixed); else every core (`cores`), adaptive. A bad KVSCOPE_THREADS falls
// back to what the rest says and `warning` explains it.
ThreadChoice chooseThreads(const char* kvscope_threads, const char* omp_num_threads, int omp_threads, int cores,
                           std::string* warning);

// Reads the environment, logs a bad value (warning) and the choice (info), and
// makes it the process's budget. Called once by each program's main. Returns
// the budget.
int useMachineThreads();

// Replaces the process's budget (a --threads option, tests).
void setThreadBudget(const ThreadChoice& choice);
ThreadChoice threadBudget();

// A --threads value: 1..kMaxThreads, else Error naming the option.
int checkedThreadCount(long long value, const std::string& option);

// Called by every forward (CausalLM::forward) on the thread about to run it:
// sets this thread's OpenMP team to its share of the budget. Costs a clock
// read and an atomic load; every 100 ms of forwards it takes a lock, and at
// most every 200 ms it reads /proc/stat (60-100 us on this VM). Returns the
// thread's share.
int shareThreadsBeforeForward();

// Hardware threads this process may run on (its CPU affinity).
int usableCores();

}  // namespace kvscope
