#include "core/control/session_controller.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/audit/cache_audit.h"
#include "core/audit/cache_diff.h"
#include "core/audit/root_cause.h"
#include "core/control/trace_capture.h"
#include "core/decode/session.h"
#include "core/error.h"
#include "core/model/bundled_models.h"
#include "core/model/model_bundle.h"
#include "core/snapshot/snapshot_builder.h"
#include "core/trace/trace_file.h"

namespace kvscope {

namespace fs = std::filesystem;

DefaultModels defaultModelDirectories() {
  try {
    return {bundledModelDirectory("target"), bundledModelDirectory("drafter")};
  } catch (const Error& error) {
    throw Error(std::string(error.what()) +
                "\nThe bundled models ship in resources/models of the source tree; `bash cmake/run.sh` sets "
                "kvscope up from a checkout, or pass --target DIR (and --drafter DIR).");
  }
}

struct SessionController::State {
  std::shared_ptr<const CausalLM> target;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int64_t> eos_ids;
  std::shared_ptr<const Drafter> drafter;
  std::string target_dir;
  std::string drafter_dir;  // empty for n-gram / none
  std::string drafter_name = "none";
  std::unique_ptr<Session> session;
  std::unique_ptr<TraceData> replay;  // an opened .kvtrace (no session then)
  std::shared_ptr<const SessionSnapshot> replay_snapshot;
  std::string prompt;
  std::shared_ptr<const DiffReport> diff;
  std::shared_ptr<const CacheAudit> audit_target;  // "Audit at cursor"
  std::shared_ptr<const CacheAudit> audit_drafter;
  SnapshotBuilder builder;

  const SessionRecord* record() const { return session ? &session->record() : replay ? &replay->record : nullptr; }
  std::string tokenText(int64_t id) const {
    if (tokenizer && id >= 0 && id < tokenizer->vocabSize()) {
      try {
        return tokenizer->tokenText(id);
      } catch (const std::exception&) {
      }
    }
    if (replay) {
      const auto it = replay->token_text.find(id);
      if (it != replay->token_text.end()) return it->second;
    }
    return "";
  }
  void forgetInvestigation() {
    diff.reset();
    audit_target.reset();
    audit_drafter.reset();
  }
};

SessionController::SessionController() : state_(std::make_unique<State>()) {}
SessionController::~SessionController() = default;

LoadResult SessionController::loadModels(const ModelSpec& spec, const Progress& progress) {
  const auto report = [&](int step, int total, const std::string& what) {
    spdlog::info("{}", what);
    if (progress) progress(step, total, what);
  };
  LoadResult result;
  const bool need_defaults = spec.target_dir.empty() || (spec.drafter_kind == DrafterKind::Model && spec.drafter_dir.empty());
  DefaultModels defaults;
  if (need_defaults) defaults = defaultModelDirectories();
  result.target_dir = spec.target_dir.empty() ? defaults.target_dir : spec.target_dir;
  const int total = spec.drafter_kind == DrafterKind::Model ? 2 : 1;
  const c10::TensorOptions options = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);

  report(0, total, "loading target model from " + result.target_dir);
  ModelBundle target = loadModelBundle(result.target_dir, options, spec.weights);

  std::shared_ptr<const Drafter> drafter;
  if (spec.drafter_kind == DrafterKind::Model) {
    result.drafter_dir = spec.drafter_dir.empty() ? defaults.drafter_dir : spec.drafter_dir;
    report(1, total, "loading drafter model from " + result.drafter_dir);
    ModelBundle draft = loadModelBundle(result.drafter_dir, options, spec.weights);
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
  state_->drafter_dir = result.drafter_dir;
  state_->drafter_name = drafter ? drafter->describe() : "none";
  state_->builder.reset();
  state_->builder.setNames(fs::path(result.target_dir).filename().string(), state_->drafter_name);
  state_->builder.setVocabulary(*state_->tokenizer);
  result.drafter_name = state_->drafter_name;
  result.vocab_size = state_->tokenizer->vocabSize();
  return result;
}

bool SessionController::hasModels() const { return state_->target != nullptr; }

std::shared_ptr<const CausalLM> SessionController::liveTarget() const {
  return state_->replay ? nullptr : state_->target;
}

SessionController::LoadedModels SessionController::loaded() const {
  LoadedModels out;
  out.target = state_->target;
  out.tokenizer = state_->tokenizer;
  out.target_dir = state_->target_dir;
  const CausalLM* drafter_model = state_->drafter ? state_->drafter->model() : nullptr;
  // Shares the drafter's ownership: the model lives as long as its drafter.
  if (drafter_model) out.drafter = std::shared_ptr<const CausalLM>(state_->drafter, drafter_model);
  if (drafter_model) out.drafter_dir = state_->drafter_dir;
  return out;
}

const Session* SessionController::liveSession() const { return state_->session.get(); }

void SessionController::showReplay(std::shared_ptr<const SessionSnapshot> snapshot) {
  require(snapshot != nullptr, "showing a replay: no snapshot");
  state_->session.reset();
  state_->builder.reset();
  state_->replay.reset();
  state_->forgetInvestigation();
  state_->diff = snapshot->diff;
  state_->prompt.clear();
  state_->replay_snapshot = std::move(snapshot);
}

bool SessionController::hasSession() const { return state_->session != nullptr; }
bool SessionController::finished() const { return state_->session && state_->session->finished(); }

void SessionController::adoptModels(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Tokenizer> tokenizer,
                                    std::vector<int64_t> eos_ids, std::shared_ptr<const Drafter> drafter,
                                    std::string target_name) {
  require(target != nullptr, "adopting models: no target model");
  state_->session.reset();
  state_->replay.reset();
  state_->target = std::move(target);
  state_->tokenizer = std::move(tokenizer);
  state_->eos_ids = std::move(eos_ids);
  state_->drafter = std::move(drafter);
  state_->target_dir = target_name;
  state_->drafter_name = state_->drafter ? state_->drafter->describe() : "none";
  state_->builder.reset();
  state_->builder.setNames(fs::path(target_name).filename().string(), state_->drafter_name);
  if (state_->tokenizer) state_->builder.setVocabulary(*state_->tokenizer);
}

void SessionController::startSession(const SessionSpec& spec) {
  require(hasModels(), "starting a session: no models loaded");
  require(state_->tokenizer != nullptr, "starting a session from text: the target has no tokenizer");
  spec.options.validate();  // before tokenizing: a bad option is named, whatever the prompt
  std::vector<int64_t> prompt = state_->tokenizer->encode(spec.prompt);
  require(!prompt.empty(), "starting a session: the prompt encodes to no tokens");
  startSession(std::move(prompt), spec.options);
  state_->prompt = spec.prompt;
}

void SessionController::startSession(std::vector<int64_t> prompt, const SessionOptions& options) {
  require(hasModels(), "starting a session: no models loaded");
  auto session = std::make_unique<Session>(state_->target, state_->drafter, std::move(prompt), options,
                                           state_->eos_ids);
  state_->session = std::move(session);
  state_->prompt.clear();
  state_->forgetInvestigation();
  state_->replay.reset();
  state_->replay_snapshot.reset();
  state_->builder.reset();
  spdlog::info("session started: {} prompt tokens, drafter {}, fault {}, eviction {}", state_->session->promptLength(),
               state_->drafter_name, faultInfo(options.fault).name,
               options.eviction ? options.eviction->describe() : std::string("none"));
}

void SessionController::stepPhase() {
  require(hasSession(), "step: no session");
  if (!state_->session->finished()) state_->session->stepPhase();
}

void SessionController::stepRound() {
  require(hasSession(), "step: no session");
  if (!state_->session->finished()) state_->session->stepRound();
}

void SessionController::runToEnd() {
  require(hasSession(), "run: no session");
  state_->session->runToEnd();
}

void SessionController::run(const std::atomic<bool>& cancel,
                   const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round) {
  require(hasSession(), "run: no session");
  // Phase by phase, so that a stop takes effect within one phase.
  while (!state_->session->finished() && !cancel.load()) {
    state_->session->stepPhase();
    const bool round_done = state_->session->nextPhase() == Phase::Draft || state_->session->finished();
    if (round_done && after_round) after_round(snapshot());
  }
}

std::shared_ptr<const SessionSnapshot> SessionController::snapshot() {
  if (!state_->session) {
    if (!state_->replay_snapshot) return nullptr;
    auto copy = std::make_shared<SessionSnapshot>(*state_->replay_snapshot);
    copy->audit_target = state_->audit_target;
    copy->audit_drafter = state_->audit_drafter;
    return copy;
  }
  auto built = state_->builder.build(*state_->session);
  std::shared_ptr<SessionSnapshot> snapshot = std::move(built);
  snapshot->diff = state_->diff;
  snapshot->audit_target = state_->audit_target;
  snapshot->audit_drafter = state_->audit_drafter;
  snapshot->prompt = state_->prompt;
  return snapshot;
}

const DiffReport& SessionController::runDiff(const SessionSpec& diff_spec, const std::atomic<bool>& cancel) {
  require(hasModels(), "diff: no models loaded");
  SessionSpec spec = diff_spec;
  spec.options.use_cache = true;  // the run under test uses the cache; the reference recomputes
  startSession(spec);
  return runDiff(&cancel);
}

const DiffReport& SessionController::runDiff(const std::atomic<bool>* cancel) {
  require(hasSession(), "diff: no session");
  Session& session = *state_->session;
  require(session.rounds().empty(), "diff: the session has already been stepped; start a new one");
  const DiffReport report = diffLockstep(session, DiffTolerances{}, cancel,
                                         [this](int64_t id) { return state_->tokenText(id); });
  state_->diff = std::make_shared<const DiffReport>(report);
  spdlog::info("diff ({}): {} agree, {} noise, {} divergent, max |delta logit| {:.3g}; {}",
               faultInfo(session.options().fault).name, report.agree, report.noise, report.divergent,
               report.max_abs_logit_diff, report.explanation());
  return *state_->diff;
}

std::vector<CacheAudit> SessionController::auditAt(const Moment& moment) {
  const SessionRecord* record = state_->record();
  require(record != nullptr, "audit: no session or trace");
  require(record->use_cache, "audit: the session runs without a cache");
  require(moment.round >= 0 && atOrBefore(moment, record->lastMoment()),
          "audit: round " + std::to_string(moment.round) + " " + phaseName(moment.phase) + " has not been recorded");
  // Values need the models that recorded the session; a replayed trace is
  // audited by row identity only.
  const bool live = state_->session != nullptr;
  const CausalLM* target = live ? &state_->session->target() : nullptr;
  const CausalLM* drafter = live && state_->session->drafter() ? state_->session->drafter()->model() : nullptr;
  std::vector<CacheAudit> audits;
  audits.push_back(kvscope::auditAt(*record, CacheRole::Target, moment, target));
  state_->audit_target = std::make_shared<const CacheAudit>(audits.back());
  state_->audit_drafter.reset();
  if (record->drafter_layers > 0) {
    audits.push_back(kvscope::auditAt(*record, CacheRole::Drafter, moment, drafter));
    state_->audit_drafter = std::make_shared<const CacheAudit>(audits.back());
  }
  for (const CacheAudit& a : audits) {
    spdlog::info("audit of the {} cache after round {} {}: {} rows ok, {} not{}", cacheRoleName(a.cache),
                 moment.round, phaseName(moment.phase), a.ok_rows, a.rows.size(),
                 a.values_checked ? "" : " (identities only: no model for this trace)");
  }
  return audits;
}

std::optional<RootCause> SessionController::rootCause() const {
  if (state_->diff && state_->diff->root_cause) return state_->diff->root_cause;
  const SessionRecord* record = state_->record();
  if (!record) return std::nullopt;
  return findRootCause(*record, RootCauseOptions{}, [this](int64_t id) { return state_->tokenText(id); });
}

void SessionController::saveTrace(const std::string& path, const std::string& gui_state_json) {
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
    info["prompt"] = state_->prompt;
    info["investigation"] = {{"fault", faultInfo(session.options().fault).name},
                             {"diff", state_->diff ? toJson(*state_->diff, true) : nlohmann::json(nullptr)}};
    writeTrace(path, captureTrace(session, state_->tokenizer.get(), info));
  } else if (state_->replay) {
    state_->replay->info["gui"] = gui;
    writeTrace(path, *state_->replay);
  } else {
    const bool capture = state_->replay_snapshot && state_->replay_snapshot->from_capture;
    throw Error("saving " + path + ": no session to save" +
                (capture ? std::string(" (an opened capture is kept in its own file)") : std::string()));
  }
  spdlog::info("trace saved to {}", path);
}

std::shared_ptr<const SessionSnapshot> SessionController::openTrace(const std::string& path, std::string* gui_state_json) {
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
  state_->forgetInvestigation();
  state_->diff = snapshot->diff;
  state_->prompt = snapshot->prompt;
  state_->replay_snapshot = snapshot;
  spdlog::info("trace opened: {} ({} rounds, {} cache entries, fault {}{})", path,
               snapshot->rounds.empty() ? 0 : snapshot->rounds.back().index, snapshot->entries.size(), snapshot->fault,
               snapshot->diff ? ", with its diff" : "");
  return snapshot;
}

}  // namespace kvscope
