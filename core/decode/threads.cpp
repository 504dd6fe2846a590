#include "core/decode/threads.h"

#include <cstdlib>
#include <string>
#include <thread>

#include <torch/types.h>

namespace kvscope {

int useMachineThreads() {
  if (const char* chosen = std::getenv("KVSCOPE_THREADS")) {
    const int threads = std::atoi(chosen);
    if (threads > 0) torch::set_num_threads(threads);
  } else if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (cores > 0) torch::set_num_threads(static_cast<int>(cores));
  }
  return torch::get_num_threads();
}

}  // namespace kvscope
