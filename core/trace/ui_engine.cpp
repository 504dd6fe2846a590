#include "core/trace/ui_engine.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/model_bundle.h"
#include "core/trace/snapshot_builder.h"

namespace kvscope {

namespace fs = std::filesystem;

DefaultModels defaultModelDirectories() {
  DefaultModels models;
  try {
    models.target_dir = bundledModelDirectory("target");
    models.drafter_dir = bundledModelDirectory("drafter");
    models.bundled = true;
    return models;
  } catch (const Error& error) {
    models.note = std::string("bundled models not found, using the test fixture models "
                              "(llama-tiny, llama-tiny-draft; random weights): ") + error.what();
  }
  const fs::path fixtures = fs::path(KVSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "models";
  models.target_dir = (fixtures / "llama-tiny").string();
  models.drafter_dir = (fixtures / "llama-tiny-draft").string();
  return models;
}

struct UiEngine::State {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int64_t> eos_ids;
  std::shared_ptr<const Drafter> drafter;
  std::string target_dir;
  std::string drafter_name = "none";
  std::unique_ptr<Session> session;
  SnapshotBuilder builder;
};

UiEngine::UiEngine() : state_(std::make_unique<State>()) {}
UiEngine::~UiEngine() = default;

UiLoadResult UiEngine::loadModels(const UiModelSpec& spec, const Progress& progress) {
  const auto report = [&](int step, int total, const std::string& what) {
    spdlog::info("{}", what);
    if (progress) progress(step, total, what);
  };
  UiLoadResult result;
  const bool need_defaults = spec.target_dir.empty() || (spec.drafter_kind == DrafterKind::Model && spec.drafter_dir.empty());
  DefaultModels defaults;
  if (need_defaults) {
    defaults = defaultModelDirectories();
    if (!defaults.bundled) {
      spdlog::warn("{}", defaults.note);
      result.notes.push_back(defaults.note);
    }
  }
  result.target_dir = spec.target_dir.empty() ? defaults.target_dir : spec.target_dir;
  const int total = spec.drafter_kind == DrafterKind::Model ? 2 : 1;
  const c10::TensorOptions options = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);

  report(0, total, "loading target model from " + result.target_dir);
  ModelBundle target = loadModelBundle(result.target_dir, options);

  std::shared_ptr<const Drafter> drafter;
  if (spec.drafter_kind == DrafterKind::Model) {
    result.drafter_dir = spec.drafter_dir.empty() ? defaults.drafter_dir : spec.drafter_dir;
    report(1, total, "loading drafter model from " + result.drafter_dir);
    ModelBundle draft = loadModelBundle(result.drafter_dir, options);
    if (draft.model->config().vocab_size != target.model->config().vocab_size) {
      throw Error("drafter " + result.drafter_dir + ": vocabulary size " +
                  std::to_string(draft.model->config().vocab_size) + " differs from the target's " +
                  std::to_string(target.model->config().vocab_size));
    }
    drafter = std::make_shared<ModelDrafter>(std::shared_ptr<const CausalLM>(std::move(draft.model)),
                                             fs::path(result.drafter_dir).filename().string());
  } else if (spec.drafter_kind == DrafterKind::Ngram) {
    drafter = std::make_shared<NgramDrafter>(spec.max_ngram);
  }
  report(total, total, "models loaded");

  // Everything loaded: replace the old state.
  state_->session.reset();
  state_->target = std::shared_ptr<const CausalLM>(std::move(target.model));
  state_->tokenizer = std::shared_ptr<const Tokenizer>(std::move(target.tokenizer));
  state_->eos_ids = target.eos_ids;
  state_->drafter = drafter;
  state_->target_dir = result.target_dir;
  state_->drafter_name = drafter ? drafter->describe() : "none";
  state_->builder.reset();
  state_->builder.setNames(fs::path(result.target_dir).filename().string(), state_->drafter_name);
  state_->builder.setVocabulary(*state_->tokenizer);
  result.drafter_name = state_->drafter_name;
  result.vocab_size = state_->tokenizer->vocabSize();
  return result;
}

bool UiEngine::hasModels() const { return state_->target != nullptr; }
bool UiEngine::hasSession() const { return state_->session != nullptr; }
bool UiEngine::finished() const { return state_->session && state_->session->finished(); }

void UiEngine::startSession(const UiSessionSpec& spec) {
  require(hasModels(), "starting a session: no models loaded");
  SessionOptions options;
  options.gamma = spec.gamma;
  options.adaptive_gamma = spec.adaptive_gamma;
  options.max_new_tokens = spec.max_new_tokens;
  options.use_cache = spec.use_cache;
  options.sampling.greedy = spec.greedy;
  options.sampling.temperature = spec.temperature;
  options.sampling.top_k = spec.top_k;
  options.sampling.top_p = spec.top_p;
  options.seed = spec.seed;
  options.bookkeeping = parseBookkeeping(spec.bookkeeping);
  options.ignore_eos = spec.ignore_eos;
  options.validate();
  std::vector<int64_t> prompt = state_->tokenizer->encode(spec.prompt);
  require(!prompt.empty(), "starting a session: the prompt encodes to no tokens");
  auto session = std::make_unique<Session>(state_->target, state_->drafter, std::move(prompt), options,
                                           state_->eos_ids);
  state_->session = std::move(session);
  state_->builder.reset();
  spdlog::info("session started: {} prompt tokens, drafter {}", state_->session->promptLength(),
               state_->drafter_name);
}

void UiEngine::stepPhase() {
  require(hasSession(), "step: no session");
  if (!state_->session->finished()) state_->session->stepPhase();
}

void UiEngine::stepRound() {
  require(hasSession(), "step: no session");
  if (!state_->session->finished()) state_->session->stepRound();
}

void UiEngine::run(const std::atomic<bool>& cancel,
                   const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round) {
  require(hasSession(), "run: no session");
  while (!state_->session->finished() && !cancel.load()) {
    state_->session->stepRound();
    if (after_round) after_round(snapshot());
  }
}

std::shared_ptr<const SessionSnapshot> UiEngine::snapshot() {
  if (!state_->session) return nullptr;
  return state_->builder.build(*state_->session);
}

}  // namespace kvscope
