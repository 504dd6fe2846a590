// Training: the BPE trainer's tokenizer round-trips its corpus, a few steps
// lower the loss and write a directory the loader reads back, resuming
// continues from the checkpoint, and the bundled pair loads and runs.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/model_bundle.h"
#include "core/train/bpe_trainer.h"
#include "core/train/greedy_acceptance.h"
#include "core/train/lr_schedule.h"
#include "core/train/model_writer.h"
#include "core/train/token_corpus.h"
#include "core/train/train_checkpoint.h"
#include "core/train/trainer.h"
#include "core/train/training_config.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {
namespace fs = std::filesystem;

// A small corpus with repetition (so a few steps can learn something),
// punctuation, digits, an apostrophe, a blank line and non-ASCII text.
std::string tinyCorpus() {
  std::string text;
  const char* lines[] = {
      "In the beginning the cat sat upon the mat, and the dog lay by the door.",
      "And the cat said unto the dog, Arise, and let us go into the field.",
      "And the dog said, I will not go; for it is cold, and the night is long.",
      "It's 1611: the year the book was printed, and the words are old.",
      "Café, naïve and résumé keep their accents \u2014 and \u00e6 too.",
  };
  for (int round = 0; round < 8; ++round) {
    for (const char* line : lines) text += std::string(line) + "\n";
    if (round % 3 == 2) text += "\n";
  }
  return text;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kvscope_train_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const nlohmann::json kTinyArch = {{"hidden_size", 32},        {"num_hidden_layers", 2},
                                  {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                  {"intermediate_size", 64},  {"max_position_embeddings", 64}};

TEST(BpeTrainer, TokenizerRoundTripsTheCorpus) {
  const std::string text = tinyCorpus();
  BpeTrainerOptions options;
  options.vocab_size = 320;
  const BpeVocabulary vocab = trainByteLevelBpe(text, options);
  EXPECT_GT(vocab.merges.size(), 10u);
  EXPECT_LE(static_cast<int64_t>(vocab.tokens.size()), options.vocab_size);
  const fs::path dir = scratch("tokenizer");
  writeTokenizerFiles(vocab, dir.string());

  const auto tokenizer = Tokenizer::fromDirectory(dir.string());
  EXPECT_EQ(tokenizer->vocabSize(), static_cast<int64_t>(vocab.tokens.size()));
  EXPECT_EQ(tokenizer->bosId(), vocab.bos_id);
  EXPECT_EQ(tokenizer->eosId(), vocab.eos_id);
  const auto ids = tokenizer->encode(text, /*add_special_tokens=*/false);
  EXPECT_LT(ids.size(), text.size() / 2);  // merges compress
  EXPECT_EQ(tokenizer->decode(ids), text);
  // Unseen text still round-trips (byte level), and BOS is added by default.
  const std::string unseen = "Zebras \xF0\x9F\xA6\x93 quietly graze: 42 of them!\n";
  const auto with_bos = tokenizer->encode(unseen);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), vocab.bos_id);
  EXPECT_EQ(tokenizer->decode(with_bos), unseen);
  EXPECT_EQ(tokenizer->tokenToId("<|eos|>"), vocab.eos_id);
  fs::remove_all(dir);
}

TEST(BpeTrainer, RejectsTooSmallVocabulary) {
  BpeTrainerOptions options;
  options.vocab_size = 100;
  EXPECT_THROW(trainByteLevelBpe("some text", options), Error);
}

TEST(LrSchedule, WarmsUpThenDecaysToTheFloor) {
  LrSchedule s{1.0, 10, 110, 0.1};
  EXPECT_NEAR(s.at(0), 0.1, 1e-12);
  EXPECT_NEAR(s.at(9), 1.0, 1e-12);
  EXPECT_NEAR(s.at(10), 1.0, 1e-12);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_GT(s.at(30), s.at(80));
}

TEST(TrainingConfig, RejectsBadArchitectures) {
  BpeTrainerOptions options;
  options.vocab_size = 300;
  const fs::path dir = scratch("config");
  writeTokenizerFiles(trainByteLevelBpe(tinyCorpus(), options), dir.string());
  const auto tokenizer = Tokenizer::fromDirectory(dir.string());
  EXPECT_THROW(llamaTrainingConfig(nlohmann::json::array(), *tokenizer, "arch.json"), Error);
  nlohmann::json missing = kTinyArch;
  missing.erase("hidden_size");
  EXPECT_THROW(llamaTrainingConfig(missing, *tokenizer, "arch.json"), Error);
  nlohmann::json bad_gqa = kTinyArch;
  bad_gqa["num_key_value_heads"] = 3;
  EXPECT_THROW(llamaTrainingConfig(bad_gqa, *tokenizer, "arch.json"), Error);
  nlohmann::json gpt2 = kTinyArch;
  gpt2["model_type"] = "gpt2";
  EXPECT_THROW(llamaTrainingConfig(gpt2, *tokenizer, "arch.json"), Error);
  const auto config = llamaTrainingConfig(kTinyArch, *tokenizer, "arch.json");
  EXPECT_EQ(config["vocab_size"], tokenizer->vocabSize());
  EXPECT_EQ(config["head_dim"], 8);
  fs::remove_all(dir);
}

TEST(Trainer, FewStepsLowerTheLossAndTheDirectoryLoadsBack) {
  torch::manual_seed(0);
  const std::string text = tinyCorpus();
  const fs::path dir = scratch("model");
  const fs::path out = dir / "model", checkpoints = dir / "checkpoints";
  BpeTrainerOptions bpe;
  bpe.vocab_size = 300;
  writeTokenizerFiles(trainByteLevelBpe(text, bpe), out.string());
  const auto tokenizer = Tokenizer::fromDirectory(out.string());
  const TokenCorpus corpus = tokenizeCorpus(text, *tokenizer);
  const nlohmann::json config_json = llamaTrainingConfig(kTinyArch, *tokenizer, "tiny");
  const ModelConfig config = parseModelConfig(config_json, "tiny");
  auto model = buildCausalLM(config, initialWeights(config, 7), torch::kFloat32, "tiny");

  TrainOptions o;
  o.steps = 40;
  o.seq_len = 32;
  o.batch_windows = 2;
  o.lr = 1e-2;
  o.eval_every = 20;
  o.eval_windows = 4;
  o.checkpoint_every = 20;
  o.checkpoint_dir = checkpoints.string();
  const auto valid = fixedWindows(corpus.valid, corpus.bos_id, o.seq_len, o.eval_windows);
  const double before = evaluateLoss(*model, valid);
  const TrainResult result = trainLanguageModel(*model, corpus, o);
  EXPECT_EQ(result.steps, 40);
  EXPECT_LT(result.final_val_loss, before - 1.0) << "before " << before;
  ASSERT_EQ(result.val_history.size(), 2u);

  writeModelDirectory(*model, {config_json, out.string(), StDType::BF16, nlohmann::json{{"steps", 40}}}, out.string());
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                           "generation_config.json", "training.json"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  const ModelBundle loaded = loadModelBundle(out.string(), torch::kFloat32);
  EXPECT_EQ(loaded.model->config().num_kv_heads, 2);
  EXPECT_NEAR(evaluateLoss(*loaded.model, valid), result.final_val_loss, 0.05);  // bf16 storage
  const auto prompt = loaded.tokenizer->encode("And the cat");
  EXPECT_EQ(greedyContinuation(*loaded.model, prompt, 4).size(), 4u);

  // Resume: a longer run continues from the saved step 40.
  o.steps = 50;
  o.resume = true;
  const TrainResult resumed = trainLanguageModel(*model, corpus, o);
  EXPECT_EQ(resumed.resumed_from, 40);
  EXPECT_EQ(resumed.steps, 50);
  EXPECT_EQ(resumed.val_history.size(), 3u);

  // A checkpoint past --steps would train nothing and report its own step.
  o.steps = 45;
  try {
    trainLanguageModel(*model, corpus, o);
    ADD_FAILURE() << "resuming past --steps must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the checkpoint is at step 50, past --steps 45"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// state.json's step was read with get<int64_t>(), which casts 2.5
// to 2 and 1e300 with undefined behaviour, and a string was an "internal
// error". Each field is now refused by name.
TEST(TrainCheckpoint, StateFieldsReadAsIntegersInRange) {
  const fs::path dir = scratch("state");
  const std::string path = (dir / "state.json").string();
  const auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  write(R"({"step": 40, "tokens": 2560, "seconds": 1.5, "val_history": [[20, 3.5], [40, 2.5]]})");
  const TrainState good = readTrainState(path);
  EXPECT_EQ(good.step, 40);
  EXPECT_EQ(good.tokens, 2560);
  ASSERT_EQ(good.val_history.size(), 2u);
  EXPECT_EQ(good.val_history[1].first, 40);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"step": 2.5})", "'step' must be an integer in [0, 1099511627776], got 2.5"},
      {R"({"step": 40.0})", "'step' must be an integer"},
      {R"({"step": 1e300})", "step"},  // the reader refuses what no int64 holds
      {R"({"step": -1})", "'step' must be an integer in [0, "},
      {R"({"step": 2000000000000})", "'step' must be an integer in [0, 1099511627776], got 2000000000000"},
      {R"({"step": "40"})", "'step' must be an integer"},
      {R"({"step": 4, "step": 40})", "duplicate key 'step'"},
      {R"({"tokens": 5})", "needs an object with 'step'"},
      {R"({"step": 4, "tokens": 0.5})", "'tokens' must be an integer"},
      {R"({"step": 4, "seconds": -3})", "'seconds' must be a finite number >= 0, got -3"},
      {R"({"step": 4, "val_history": [[5, 1.0]]})", "'val_history[0]'[0] (a step) must be an integer in [1, 4]"},
      {R"({"step": 4, "val_history": [[2.5, 1.0]]})", "'val_history[0]'[0] (a step) must be an integer"},
      {R"({"step": 4, "val_history": [[2, "x"]]})", "'val_history[0]'[1] (a loss) must be a finite number"},
      {R"({"step": 4, "val_history": [2]})", "'val_history[0]' must be a [step, loss] pair"},
      {R"({"step": 4, "val_history": {}})", "'val_history' must be a list"},
  };
  for (const auto& [text, phrase] : cases) {
    SCOPED_TRACE(text);
    write(text);
    hostile::expectRefused([&] { readTrainState(path); }, {path, phrase});
  }
  fs::remove_all(dir);
}

TEST(Trainer, RejectsBadOptions) {
  BpeTrainerOptions bpe;
  bpe.vocab_size = 300;
  const std::string text = tinyCorpus();
  const fs::path dir = scratch("options");
  writeTokenizerFiles(trainByteLevelBpe(text, bpe), dir.string());
  const auto tokenizer = Tokenizer::fromDirectory(dir.string());
  const ModelConfig config = parseModelConfig(llamaTrainingConfig(kTinyArch, *tokenizer, "tiny"), "tiny");
  auto model = buildCausalLM(config, initialWeights(config, 1), torch::kFloat32, "tiny");
  const TokenCorpus corpus = tokenizeCorpus(text, *tokenizer);
  TrainOptions o;
  o.steps = 0;
  EXPECT_THROW(trainLanguageModel(*model, corpus, o), Error);
  o.steps = 1;
  o.seq_len = 1000;  // beyond max_position_embeddings
  EXPECT_THROW(trainLanguageModel(*model, corpus, o), Error);
  o.seq_len = 16;
  o.distill_weight = 0.5;  // no teacher
  EXPECT_THROW(trainLanguageModel(*model, corpus, o), Error);
  fs::remove_all(dir);
}

TEST(BundledModels, TargetAndDrafterLoadAndRunSpeculativeRounds) {
  std::string target_dir, drafter_dir;
  try {
    target_dir = bundledModelDirectory("target");
    drafter_dir = bundledModelDirectory("drafter");
  } catch (const Error&) {
    GTEST_SKIP() << "no bundled models in resources/models";
  }
  const ModelBundle target = loadModelBundle(target_dir, torch::kFloat32);
  const ModelBundle drafter = loadModelBundle(drafter_dir, torch::kFloat32);
  EXPECT_EQ(target.model->config().vocab_size, drafter.model->config().vocab_size);
  EXPECT_LT(target.model->config().num_kv_heads, target.model->config().num_heads);  // GQA
  EXPECT_LT(drafter.model->config().num_layers, target.model->config().num_layers);
  const auto prompt = target.tokenizer->encode("And God said unto Moses,");
  EXPECT_EQ(prompt, drafter.tokenizer->encode("And God said unto Moses,"));
  {
    torch::InferenceMode guard;
    const auto ids = torch::tensor(prompt, torch::kInt64);
    const auto logits = target.model->forward(ids, 0, nullptr);
    EXPECT_EQ(logits.size(0), static_cast<int64_t>(prompt.size()));
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(drafter.model->forward(ids, 0, nullptr)).all().item<bool>());
  }
  const AcceptanceStats stats = greedyAcceptance(*target.model, *drafter.model, prompt, 4, 12);
  EXPECT_GT(stats.rounds, 0);
  EXPECT_EQ(stats.drafted, 4 * stats.rounds);
}

// The fast drafter (resources/models/README.md, "A drafter made for speed"):
// a tenth of the target's parameters, and on the 31 held-out prompts it
// keeps the greedy acceptance the model card states. 0.607 was measured with
// the AVX-512 kernels; an argmax that ties within float rounding may flip on
// another instruction set, so the test holds it at 0.59, still far above what
// an untrained drafter of this shape gets (about 0.1).
TEST(BundledModels, FastDrafterIsSmallAndKeepsItsAlphaOnHeldOutPrompts) {
  std::string target_dir, drafter_dir;
  try {
    target_dir = bundledModelDirectory("target");
    drafter_dir = bundledModelDirectory("fast-drafter");
  } catch (const Error&) {
    GTEST_SKIP() << "no bundled fast drafter in resources/models";
  }
  const ModelBundle target = loadModelBundle(target_dir, torch::kFloat32);
  const ModelBundle drafter = loadModelBundle(drafter_dir, torch::kFloat32);
  EXPECT_EQ(drafter.model->config().vocab_size, target.model->config().vocab_size);
  EXPECT_LT(drafter.model->parameterCount() * 10, target.model->parameterCount());
  std::ifstream prompts(fs::path(drafter_dir).parent_path() / "heldout_prompts.txt");
  ASSERT_TRUE(prompts.good());
  AcceptanceStats total;
  int count = 0;
  for (std::string line; std::getline(prompts, line);) {
    if (line.empty()) continue;
    const AcceptanceStats s = greedyAcceptance(*target.model, *drafter.model, target.tokenizer->encode(line), 4, 48);
    total.drafted += s.drafted;
    total.accepted += s.accepted;
    ++count;
  }
  EXPECT_EQ(count, 31);
  EXPECT_GE(total.alpha(), 0.59) << total.accepted << " of " << total.drafted;
}

}  // namespace
}  // namespace kvscope
