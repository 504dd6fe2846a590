#pragma once
// A resumable training checkpoint: a directory holding model.safetensors
// (float32 weights), optimizer.pt (AdamW state) and state.json (step,
// tokens, elapsed time, validation history). Saved into a temporary
// directory and swapped in, so a run killed mid-save keeps the last one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "core/model/causal_lm.h"

namespace kvscope {

struct TrainState {
  int64_t step = 0;
  int64_t tokens = 0;
  double seconds = 0;
  std::vector<std::pair<int64_t, double>> val_history;
};

// Steps beyond this are refused in state.json: far above any run (1e9 steps
// of even one token each is years of CPU), low enough to never overflow.
constexpr int64_t kMaxTrainSteps = int64_t{1} << 40;

// Reads a checkpoint's state.json. Every field is checked before use: 'step'
// and 'tokens' are integers >= 0 (a float or 1e300 is refused by name, not
// cast), 'seconds' and each loss finite, each val_history step in
// [1, step]; a repeated key is refused. Throws Error naming the file and field.
TrainState readTrainState(const std::string& path);

void saveTrainCheckpoint(const std::string& dir, const CausalLM& model, torch::optim::Optimizer& optimizer,
                         const TrainState& state);

// Loads the newest complete checkpoint under dir into model and optimizer;
// nullopt when there is none. Throws Error when one exists but does not
// match the model.
std::optional<TrainState> loadTrainCheckpoint(const std::string& dir, CausalLM& model,
                                              torch::optim::Optimizer& optimizer);

}  // namespace kvscope
