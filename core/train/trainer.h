#pragma once
// Trains a CausalLM in place with libtorch autograd: next-token
// cross-entropy on random windows of a tokenized corpus (optionally mixed
// with a KL term to a teacher's distribution: knowledge distillation),
// AdamW, warm-up + cosine learning rate, gradient clipping, periodic
// validation loss and resumable checkpoints (weights, optimizer, step).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"
#include "core/train/token_corpus.h"

namespace kvscope {

struct TrainOptions {
  int64_t steps = 1000;
  int64_t seq_len = 128;        // tokens per window (BOS included)
  int64_t batch_windows = 8;    // windows per optimizer step
  double lr = 3e-3;             // peak learning rate
  int64_t warmup_steps = -1;    // -1: 5% of steps, at most 200
  double min_lr_ratio = 0.1;    // final rate = min_lr_ratio * lr
  double weight_decay = 0.1;    // on matrices only, not norms or biases
  double grad_clip = 1.0;       // max global gradient norm (<= 0: off)
  int64_t eval_every = 200;     // steps between validation losses
  int64_t eval_windows = 32;    // held-out windows per validation
  int64_t checkpoint_every = 200;
  int64_t log_every = 10;
  uint64_t seed = 1;
  std::string checkpoint_dir;   // empty: no checkpoints
  bool resume = false;          // continue from checkpoint_dir if one is there

  // Knowledge distillation: loss = (1 - w) * CE + w * T^2 * KL(teacher_T || student_T).
  const CausalLM* teacher = nullptr;
  double distill_weight = 0.0;
  double distill_temperature = 1.0;
};

struct TrainProgress {
  int64_t step = 0;   // optimizer steps done
  int64_t total = 0;
  double loss = 0;    // mean training loss since the last report
  double lr = 0;
  double tokens_per_second = 0;
  double elapsed_seconds = 0;  // this process plus earlier runs of a resumed one
  double eta_seconds = 0;
  std::optional<double> val_loss;  // set on validation steps
  std::string note;                // "resumed from step N", "checkpoint saved", ...
};

struct TrainResult {
  int64_t steps = 0;
  int64_t tokens = 0;             // training tokens seen, over all runs
  double seconds = 0;             // wall time, over all runs
  double final_train_loss = 0;
  double final_val_loss = 0;
  std::vector<std::pair<int64_t, double>> val_history;  // (step, loss)
  int64_t resumed_from = 0;
};

using ProgressCallback = std::function<void(const TrainProgress&)>;

// Throws Error for bad options or an unreadable checkpoint.
TrainResult trainLanguageModel(CausalLM& model, const TokenCorpus& corpus, const TrainOptions& options,
                               const ProgressCallback& progress = {});

// Mean next-token cross-entropy (nats per token) over windows, no grad.
double evaluateLoss(const CausalLM& model, const std::vector<Window>& windows);

}  // namespace kvscope
