#include "core/train/trainer.h"

#include <chrono>
#include <cmath>

#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include "core/error.h"
#include "core/train/lr_schedule.h"
#include "core/train/train_checkpoint.h"

namespace kvscope {
namespace {

using Clock = std::chrono::steady_clock;

at::Tensor idTensor(const std::vector<int64_t>& ids) {
  return torch::tensor(at::ArrayRef<int64_t>(ids), torch::kInt64);
}

void checkOptions(const CausalLM& model, const TrainOptions& o) {
  require(o.steps > 0, "train: --steps must be positive, got " + std::to_string(o.steps));
  require(o.seq_len >= 2, "train: --seq-len must be at least 2");
  require(o.seq_len <= model.config().contextLength(),
          "train: --seq-len " + std::to_string(o.seq_len) + " exceeds the model's max_position_embeddings " +
              std::to_string(model.config().contextLength()));
  require(o.batch_windows > 0, "train: --batch must be positive");
  require(o.lr > 0 && std::isfinite(o.lr), "train: --lr must be positive");
  require(o.eval_every > 0 && o.eval_windows > 0 && o.log_every > 0, "train: eval/log intervals must be positive");
  require(o.distill_weight >= 0 && o.distill_weight <= 1, "train: --distill must be in [0, 1]");
  require(o.distill_temperature > 0, "train: distillation temperature must be positive");
  if (o.distill_weight > 0) {
    require(o.teacher != nullptr, "train: distillation needs a teacher model");
    require(o.teacher->config().vocab_size == model.config().vocab_size,
            "train: the teacher's vocabulary size differs from the student's (they must share a tokenizer)");
  }
}

// Loss of one window; adds the distillation term when a teacher is given.
at::Tensor windowLoss(const CausalLM& model, const Window& w, const TrainOptions& o) {
  const at::Tensor input = idTensor(w.input), target = idTensor(w.target);
  const at::Tensor logits = model.forward(input, 0, nullptr);  // [T, V]
  at::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
  if (o.distill_weight > 0) {
    at::Tensor teacher_probs;
    {
      torch::NoGradGuard no_grad;
      teacher_probs = torch::softmax(o.teacher->forward(input, 0, nullptr) / o.distill_temperature, -1);
    }
    const double t = o.distill_temperature;
    const at::Tensor student_log_probs = torch::log_softmax(logits / t, -1);
    const at::Tensor kl =
        (teacher_probs * (torch::log(teacher_probs.clamp_min(1e-12)) - student_log_probs)).sum(-1).mean();
    loss = (1.0 - o.distill_weight) * loss + o.distill_weight * t * t * kl;
  }
  return loss;
}

std::unique_ptr<torch::optim::AdamW> makeOptimizer(const CausalLM& model, const TrainOptions& o) {
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& [name, tensor] : model.namedParameters()) (tensor.dim() >= 2 ? decay : no_decay).push_back(tensor);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(o.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

}  // namespace

double evaluateLoss(const CausalLM& model, const std::vector<Window>& windows) {
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t count = 0;
  for (const Window& w : windows) {
    const at::Tensor logits = model.forward(idTensor(w.input), 0, nullptr);
    total += torch::nn::functional::cross_entropy(
                 logits, idTensor(w.target),
                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                 .item<double>();
    count += static_cast<int64_t>(w.target.size());
  }
  require(count > 0, "evaluate: no windows");
  return total / static_cast<double>(count);
}

TrainResult trainLanguageModel(CausalLM& model, const TokenCorpus& corpus, const TrainOptions& o,
                               const ProgressCallback& progress) {
  checkOptions(model, o);
  std::vector<at::Tensor> params;
  for (auto& [name, tensor] : model.namedParameters()) {
    tensor.requires_grad_(true);
    params.push_back(tensor);
  }
  auto optimizer = makeOptimizer(model, o);
  LrSchedule schedule;
  schedule.peak = o.lr;
  schedule.total_steps = o.steps;
  schedule.warmup_steps = o.warmup_steps >= 0 ? o.warmup_steps : std::min<int64_t>(200, o.steps / 20);
  schedule.min_ratio = o.min_lr_ratio;

  TrainState state;
  TrainResult result;
  if (o.resume && !o.checkpoint_dir.empty()) {
    if (auto loaded = loadTrainCheckpoint(o.checkpoint_dir, model, *optimizer)) {
      state = *loaded;
      // Past the end, the loop would train nothing and report the stored
      // step as this run's: say so instead.
      if (state.step > o.steps) {
        fail(o.checkpoint_dir, "the checkpoint is at step " + std::to_string(state.step) + ", past --steps " +
                                   std::to_string(o.steps) + " (raise --steps to continue training it)");
      }
      result.resumed_from = state.step;
      if (progress) {
        TrainProgress p;
        p.step = state.step;
        p.total = o.steps;
        p.note = "resumed from step " + std::to_string(state.step) + " in " + o.checkpoint_dir;
        progress(p);
      }
    }
  }

  const std::vector<Window> valid = fixedWindows(corpus.valid, corpus.bos_id, o.seq_len, o.eval_windows);
  const auto started = Clock::now();
  const double seconds_before = state.seconds;
  const int64_t first_step = state.step;
  double loss_sum = 0;
  int64_t loss_count = 0;
  double last_loss = 0;
  auto elapsed = [&] { return seconds_before + std::chrono::duration<double>(Clock::now() - started).count(); };

  while (state.step < o.steps) {
    // The random stream depends on the step, so a resumed run draws the
    // windows the uninterrupted one would have.
    std::mt19937_64 rng(o.seed * 1000003ULL + static_cast<uint64_t>(state.step));
    const double lr = schedule.at(state.step);
    for (auto& group : optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);

    optimizer->zero_grad();
    double step_loss = 0;
    for (int64_t b = 0; b < o.batch_windows; ++b) {
      const Window w = randomWindow(corpus.train, corpus.bos_id, o.seq_len, rng);
      at::Tensor loss = windowLoss(model, w, o) / static_cast<double>(o.batch_windows);
      loss.backward();
      step_loss += loss.item<double>();
      state.tokens += static_cast<int64_t>(w.target.size());
    }
    if (!std::isfinite(step_loss)) throw Error("train: the loss became " + std::to_string(step_loss) +
                                               " at step " + std::to_string(state.step) + " (try a lower --lr)");
    if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, o.grad_clip);
    optimizer->step();
    ++state.step;
    loss_sum += step_loss;
    ++loss_count;
    last_loss = step_loss;

    const bool last = state.step == o.steps;
    const bool validate = state.step % o.eval_every == 0 || last;
    TrainProgress p;
    if (validate) {
      p.val_loss = evaluateLoss(model, valid);
      state.val_history.emplace_back(state.step, *p.val_loss);
    }
    state.seconds = elapsed();
    if (!o.checkpoint_dir.empty() && o.checkpoint_every > 0 && (state.step % o.checkpoint_every == 0 || last)) {
      saveTrainCheckpoint(o.checkpoint_dir, model, *optimizer, state);
      p.note = "checkpoint saved";
    }
    if (progress && (state.step % o.log_every == 0 || validate || last)) {
      const double run_seconds = state.seconds - seconds_before;
      const int64_t run_steps = state.step - first_step;
      p.step = state.step;
      p.total = o.steps;
      p.loss = loss_sum / static_cast<double>(loss_count);
      p.lr = lr;
      p.elapsed_seconds = state.seconds;
      p.tokens_per_second = run_seconds > 0 ? run_steps * o.batch_windows * o.seq_len / run_seconds : 0;
      p.eta_seconds = run_steps > 0 ? run_seconds / run_steps * static_cast<double>(o.steps - state.step) : 0;
      progress(p);
      loss_sum = 0;
      loss_count = 0;
    }
  }
  for (auto& tensor : params) tensor.requires_grad_(false);
  result.steps = state.step;
  result.tokens = state.tokens;
  result.seconds = state.seconds;
  result.final_train_loss = last_loss;
  result.val_history = state.val_history;
  result.final_val_loss = state.val_history.empty() ? evaluateLoss(model, valid) : state.val_history.back().second;
  return result;
}

}  // namespace kvscope
