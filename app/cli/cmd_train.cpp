// kvscope-cli train: trains a Llama-architecture model on a text file and
// writes a Hugging Face directory (see core/train/).
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <torch/types.h>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/runtime/threads.h"
#include "core/error.h"
#include "core/model/model_bundle.h"
#include "core/train/bpe_trainer.h"
#include "core/train/model_writer.h"
#include "core/train/trainer.h"
#include "core/train/training_config.h"

namespace kvscope::cli {

namespace {
namespace fs = std::filesystem;

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (s >= 3600) std::snprintf(text, sizeof text, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else std::snprintf(text, sizeof text, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return text;
}

void printProgress(const TrainProgress& p) {
  if (!p.note.empty() && p.loss == 0) {
    std::cerr << p.note << std::endl;
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  elapsed %s  eta %s",
                (long long)p.step, (long long)p.total, p.loss, p.lr, p.tokens_per_second,
                duration(p.elapsed_seconds).c_str(), duration(p.eta_seconds).c_str());
  std::cerr << line;
  if (p.val_loss) std::cerr << "  val_loss " << *p.val_loss;
  if (!p.note.empty()) std::cerr << "  (" << p.note << ")";
  std::cerr << std::endl;
}

// --arch-config: a JSON file, or inline JSON starting with '{'.
nlohmann::json readArchConfig(const std::string& value) {
  const bool inline_json = !value.empty() && value.front() == '{';
  const std::string text = inline_json ? value : readFileBytes(value);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error((inline_json ? std::string("--arch-config") : value) + ": not valid JSON");
  return j;
}

int runTrain(Args& args) {
  const bool json = args.flag("json");
  const std::string corpus_path = args.required("corpus");
  const std::string arch_value = args.required("arch-config");
  const std::string out = args.required("out");
  TrainOptions o;
  o.steps = args.integer("steps", 0);
  o.resume = args.flag("resume");
  o.seq_len = args.integer("seq-len", o.seq_len);
  o.batch_windows = args.integer("batch", o.batch_windows);
  o.lr = args.number("lr", o.lr);
  o.warmup_steps = args.integer("warmup", o.warmup_steps);
  o.min_lr_ratio = args.number("min-lr-ratio", o.min_lr_ratio);
  o.weight_decay = args.number("weight-decay", o.weight_decay);
  o.grad_clip = args.number("grad-clip", o.grad_clip);
  o.eval_every = args.integer("eval-every", o.eval_every);
  o.eval_windows = args.integer("eval-windows", o.eval_windows);
  o.checkpoint_every = args.integer("checkpoint-every", o.checkpoint_every);
  o.log_every = args.integer("log-every", o.log_every);
  o.seed = static_cast<uint64_t>(args.integer("seed", 1));
  o.checkpoint_dir = args.value("checkpoint-dir").value_or(out + ".checkpoint");
  o.distill_weight = args.number("distill", 0.0);
  o.distill_temperature = args.number("distill-temperature", 1.0);
  const auto teacher_dir = args.value("teacher");
  const auto init_from = args.value("init-from");
  const auto tokenizer_option = args.value("tokenizer");
  const int64_t vocab = args.integer("vocab", 4096);
  const int64_t threads = args.integer("threads", 0);
  // The teacher and the written model's read-back (training itself is float32).
  const WeightResidency residency = weightResidency(args);
  const StDType storage = storageType(args.value("dtype").value_or("bf16"));
  args.finish();

  if (o.steps <= 0) throw Error("--steps must be a positive integer (got " + std::to_string(o.steps) + ")");
  if (!fs::is_regular_file(corpus_path)) throw Error("--corpus " + corpus_path + ": no such file");
  const std::string text = readFileBytes(corpus_path);
  if (text.empty()) throw Error("--corpus " + corpus_path + ": the file is empty");
  const nlohmann::json arch = readArchConfig(arch_value);
  if (o.distill_weight > 0 && !teacher_dir) throw Error("--distill needs --teacher DIR");
  if (threads != 0) setThreadBudget({checkedThreadCount(threads, "--threads"), false, "--threads"});

  // Tokenizer: the given one, or one trained on the corpus into out.
  std::string tokenizer_dir;
  if (tokenizer_option) {
    tokenizer_dir = *tokenizer_option;
  } else {
    tokenizer_dir = out;
    if (!fs::exists(fs::path(out) / "tokenizer.json") || !o.resume) {
      BpeTrainerOptions bpe;
      bpe.vocab_size = vocab;
      writeTokenizerFiles(trainByteLevelBpe(text, bpe), out);
    }
  }
  const auto tokenizer = Tokenizer::fromDirectory(tokenizer_dir);
  const nlohmann::json config_json =
      llamaTrainingConfig(arch, *tokenizer, arch_value.front() == '{' ? "--arch-config" : arch_value);
  const ModelConfig config = parseModelConfig(config_json, "--arch-config");
  const auto options = computeOptions();

  NamedTensors weights = initialWeights(config, o.seed);
  if (init_from) {
    const int64_t copied = copyMatchingWeights(weights, *init_from);
    std::cerr << "initialized " << copied << " of " << weights.size() << " tensors from " << *init_from << std::endl;
  }
  auto model = buildCausalLM(config, weights, options, "train");
  std::unique_ptr<CausalLM> teacher;
  if (teacher_dir) {
    teacher = loadCausalLM(*teacher_dir, options, residency);
    o.teacher = teacher.get();
  }

  const TokenCorpus corpus = tokenizeCorpus(text, *tokenizer);
  std::cerr << "model: " << describe(config) << ", " << model->parameterCount() << " parameters; corpus: "
            << corpus.train.ids.size() << " training tokens, " << corpus.valid.ids.size() << " held out; "
            << torch::get_num_threads() << " threads" << std::endl;

  const TrainResult result = trainLanguageModel(*model, corpus, o, printProgress);

  // Write the directory, then read it back as any user would and measure the
  // held-out loss of the stored (e.g. bf16) weights.
  nlohmann::json training = {{"corpus", fs::path(corpus_path).filename().string()},
                             {"corpus_bytes", text.size()},
                             {"train_tokens", corpus.train.ids.size()},
                             {"valid_tokens", corpus.valid.ids.size()},
                             {"parameters", model->parameterCount()},
                             {"steps", result.steps},
                             {"tokens_seen", result.tokens},
                             {"seconds", result.seconds},
                             {"seq_len", o.seq_len},
                             {"batch_windows", o.batch_windows},
                             {"lr", o.lr},
                             {"weight_decay", o.weight_decay},
                             {"grad_clip", o.grad_clip},
                             {"seed", o.seed},
                             {"final_train_loss", result.final_train_loss},
                             {"final_val_loss_fp32", result.final_val_loss},
                             {"val_history", result.val_history}};
  if (teacher_dir) {
    training["teacher"] = fs::path(*teacher_dir).filename().string();
    training["distill_weight"] = o.distill_weight;
    training["distill_temperature"] = o.distill_temperature;
  }
  if (init_from) training["init_from"] = fs::path(*init_from).filename().string();
  ModelDirectoryContents contents{config_json, tokenizer_dir, storage, training};
  writeModelDirectory(*model, contents, out);

  const ModelBundle saved = loadModelBundle(out, options, residency);
  const double stored_val_loss =
      evaluateLoss(*saved.model, fixedWindows(corpus.valid, corpus.bos_id, o.seq_len, o.eval_windows));
  training["final_val_loss"] = stored_val_loss;
  contents.training = training;
  writeModelDirectory(*saved.model, contents, out);
  if (!json) {
    std::cout << "wrote " << out << ": " << result.steps << " steps in " << duration(result.seconds)
              << ", final val_loss " << stored_val_loss << " (stored weights)\n";
  }
  if (json) printJson({{"out", out},
                       {"steps", result.steps},
                       {"seconds", result.seconds},
                       {"final_train_loss", result.final_train_loss},
                       {"final_val_loss", stored_val_loss},
                       {"resumed_from", result.resumed_from},
                       {"parameters", model->parameterCount()}});
  return 0;
}

const CommandRegistrar kRegister{"train",
    "train --corpus FILE --arch-config JSON --steps N --out DIR [--resume] [--tokenizer DIR | --vocab N]\n"
    "           [--seq-len T] [--batch B] [--lr LR] [--warmup W] [--min-lr-ratio R] [--weight-decay D]\n"
    "           [--grad-clip C] [--eval-every K] [--eval-windows K] [--checkpoint-every K] [--checkpoint-dir DIR]\n"
    "           [--log-every K]\n"
    "           [--teacher DIR --distill W [--distill-temperature T]] [--init-from DIR] [--dtype bf16|f16|f32]\n"
    "           [--threads N] [--seed S] [--weights stored|fp32 (the teacher and the read-back)] [--json]",
    runTrain};

}  // namespace
}  // namespace kvscope::cli
