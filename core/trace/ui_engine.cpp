#include "core/trace/ui_engine.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/model_bundle.h"
#include "core/trace/cache_audit.h"
#include "core/trace/cache_diff.h"
#include "core/trace/snapshot_builder.h"
#include "core/trace/trace_file.h"

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
  std::unique_ptr<TraceData> replay;  // an opened .kvtrace (no session then)
  std::shared_ptr<const SessionSnapshot> replay_snapshot;
  std::shared_ptr<const DiffData> diff;
  std::shared_ptr<const AuditData> audit;  // "Audit now", until the next step
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
  options.fault = parseFault(spec.fault);
  options.validate();
  std::vector<int64_t> prompt = state_->tokenizer->encode(spec.prompt);
  require(!prompt.empty(), "starting a session: the prompt encodes to no tokens");
  auto session = std::make_unique<Session>(state_->target, state_->drafter, std::move(prompt), options,
                                           state_->eos_ids);
  state_->session = std::move(session);
  state_->diff.reset();
  state_->audit.reset();
  state_->replay.reset();
  state_->replay_snapshot.reset();
  state_->builder.reset();
  spdlog::info("session started: {} prompt tokens, drafter {}", state_->session->promptLength(),
               state_->drafter_name);
}

void UiEngine::stepPhase() {
  require(hasSession(), "step: no session");
  state_->audit.reset();
  if (!state_->session->finished()) state_->session->stepPhase();
}

void UiEngine::stepRound() {
  require(hasSession(), "step: no session");
  state_->audit.reset();
  if (!state_->session->finished()) state_->session->stepRound();
}

void UiEngine::run(const std::atomic<bool>& cancel,
                   const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round) {
  require(hasSession(), "run: no session");
  state_->audit.reset();
  // Phase by phase, so that a stop takes effect within one phase.
  while (!state_->session->finished() && !cancel.load()) {
    state_->session->stepPhase();
    const bool round_done = state_->session->nextPhase() == Phase::Draft || state_->session->finished();
    if (round_done && after_round) after_round(snapshot());
  }
}

std::shared_ptr<const SessionSnapshot> UiEngine::snapshot() {
  if (!state_->session) return state_->replay_snapshot;
  auto built = state_->builder.build(*state_->session);
  std::shared_ptr<SessionSnapshot> snapshot = std::move(built);
  snapshot->diff = state_->diff;
  snapshot->audit = state_->audit;
  snapshot->fault = faultInfo(state_->session->options().fault).name;
  return snapshot;
}

namespace {
std::shared_ptr<const AuditData> toAuditData(const AuditReport& audit, Phase after_phase) {
  auto data = std::make_shared<AuditData>();
  data->cache = audit.cache;
  data->round = audit.round;
  data->after_phase = after_phase;
  data->error = audit.error;
  data->bad_cells = audit.bad_cells;
  data->max_value_error = audit.max_value_error;
  if (audit.first_bad) {
    data->has_bad_cell = true;
    data->bad_layer = audit.first_bad->layer;
    data->bad_head = audit.first_bad->head;
    data->bad_position = audit.first_bad->position;
    data->bad_error = audit.first_bad->error;
    data->bad_kind = audit.first_bad->kind;
  }
  return data;
}

std::shared_ptr<const DiffData> toDiffData(const DiffReport& report, const std::string& fault) {
  auto data = std::make_shared<DiffData>();
  data->fault = fault;
  for (const PositionDiff& p : report.positions) {
    DiffPoint point;
    point.cache = p.cache;
    point.round = p.round;
    point.position = p.position;
    point.max_abs_logit_diff = p.max_abs_logit_diff;
    point.kl = p.kl;
    point.top1_agree = p.top1_agree;
    point.verdict = p.verdict == PositionClass::Agree ? 0 : (p.verdict == PositionClass::Noise ? 1 : 2);
    data->points.push_back(point);
  }
  data->agree = report.agree;
  data->noise = report.noise;
  data->divergent = report.divergent;
  data->max_abs_logit_diff = report.max_abs_logit_diff;
  if (report.first_divergence) {
    data->diverged = true;
    data->divergence_cache = report.first_divergence->cache;
    data->divergence_round = report.first_divergence->round;
    data->divergence_position = report.first_divergence->position;
  }
  if (report.audit_at_divergence) {  // audited right after the pass that diverged
    const bool target = report.audit_at_divergence->cache == CacheRole::Target;
    data->audit = toAuditData(*report.audit_at_divergence, target ? Phase::Verify : Phase::Draft);
  }
  return data;
}
}  // namespace

void UiEngine::auditNow() {
  require(hasSession(), "audit: no session");
  const Session& session = *state_->session;
  require(session.options().use_cache, "audit: the session runs without a cache");
  int64_t round = session.currentRound();
  Phase phase = Phase::Prune;
  {  // the state audited is after the last phase that ran
    SessionSnapshot where;
    where.current_round = session.currentRound();
    where.next_phase = session.nextPhase();
    round = where.lastRound();
    phase = where.lastPhase();
  }
  require(round >= 0, "audit: nothing has run yet");
  c10::InferenceMode guard;
  AuditReport report = auditCache(session.target(), *session.targetCache(), session.believedCacheTokens(CacheRole::Target),
                                  CacheRole::Target, round);
  if (report.clean() && session.drafter() && session.drafter()->model() && session.drafterCache()) {
    AuditReport drafter = auditCache(*session.drafter()->model(), *session.drafterCache(),
                                     session.believedCacheTokens(CacheRole::Drafter), CacheRole::Drafter, round);
    if (!drafter.clean()) report = std::move(drafter);
  }
  state_->audit = toAuditData(report, phase);
  spdlog::info("audit after round {} {}: {} cache {}", round, phaseName(phase), cacheRoleName(report.cache),
               report.clean() ? std::string("clean, max |delta| ") + std::to_string(report.max_value_error)
                              : std::to_string(report.bad_cells) + " bad cells, first at layer " +
                                    std::to_string(report.first_bad->layer) + " head " +
                                    std::to_string(report.first_bad->head) + " position " +
                                    std::to_string(report.first_bad->position));
}

void UiEngine::runDiff(const UiSessionSpec& diff_spec, const std::atomic<bool>& cancel) {
  require(hasModels(), "diff: no models loaded");
  UiSessionSpec spec = diff_spec;
  spec.use_cache = true;  // the run under test uses the cache; the reference recomputes
  startSession(spec);
  const DiffReport report = diffLockstep(*state_->session, DiffTolerances{}, &cancel);
  state_->diff = toDiffData(report, spec.fault);
  spdlog::info("diff ({}): {} agree, {} noise, {} divergent, max |delta logit| {:.3g}{}", spec.fault, report.agree,
               report.noise, report.divergent, report.max_abs_logit_diff,
               report.first_divergence ? ", first divergence at round " + std::to_string(report.first_divergence->round) +
                                             " position " + std::to_string(report.first_divergence->position)
                                       : std::string());
}

void UiEngine::saveTrace(const std::string& path, const std::string& gui_state_json) {
  nlohmann::json gui = nlohmann::json::object();
  if (!gui_state_json.empty()) {
    gui = nlohmann::json::parse(gui_state_json, nullptr, false);
    if (gui.is_discarded()) gui = nlohmann::json::object();
  }
  if (state_->session) {
    const Session& session = *state_->session;
    nlohmann::json info;
    info["target"]["name"] = fs::path(state_->target_dir).filename().string();
    info["target"]["dir"] = state_->target_dir;
    info["state"] = {{"current_round", session.currentRound()},
                     {"next_phase", static_cast<int>(session.nextPhase())},
                     {"current_gamma", session.currentGamma()}};
    info["gui"] = gui;
    writeTrace(path, captureTrace(session, state_->tokenizer.get(), info));
  } else if (state_->replay) {
    state_->replay->info["gui"] = gui;
    writeTrace(path, *state_->replay);
  } else {
    throw Error("saving " + path + ": no session to save");
  }
  spdlog::info("trace saved to {}", path);
}

std::shared_ptr<const SessionSnapshot> UiEngine::openTrace(const std::string& path, std::string* gui_state_json) {
  auto trace = std::make_unique<TraceData>(readTrace(path));
  SnapshotBuilder builder;
  auto snapshot = builder.build(*trace);
  if (gui_state_json) {
    *gui_state_json = trace->info.contains("gui") ? trace->info["gui"].dump() : std::string("{}");
  }
  // Only now, with the file read and converted, drop the live session.
  state_->session.reset();
  state_->builder.reset();
  state_->replay = std::move(trace);
  state_->replay_snapshot = snapshot;
  spdlog::info("trace opened: {} ({} rounds, {} cache entries)", path,
               snapshot->rounds.empty() ? 0 : snapshot->rounds.back().index, snapshot->entries.size());
  return snapshot;
}

}  // namespace kvscope
