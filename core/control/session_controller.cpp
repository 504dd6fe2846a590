#include "core/control/session_controller.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/audit/batch_diff.h"
#include "core/audit/cache_audit.h"
#include "core/audit/cache_diff.h"
#include "core/audit/root_cause.h"
#include "core/control/trace_capture.h"
#include "core/decode/batch_session.h"
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
  std::unique_ptr<Session> session;     // one sequence
  std::unique_ptr<BatchSession> batch;  // several decoded together (session is null then)
  size_t shown = 0;                     // the batch's (or a batch trace's) sequence the snapshots show
  std::unique_ptr<TraceData> replay;  // an opened .kvtrace (no session then)
  std::shared_ptr<const SessionSnapshot> replay_snapshot;
  std::string prompt;
  std::shared_ptr<const DiffReport> diff;
  std::shared_ptr<const CacheAudit> audit_target;  // "Audit at cursor"
  std::shared_ptr<const CacheAudit> audit_drafter;
  SnapshotBuilder builder;

  // The session the views show: the one sequence, or the batch's shown one.
  const Session* live() const { return batch ? &batch->sequence(shown) : session.get(); }
  const SessionRecord* record() const {
    if (live()) return &live()->record();
    return replay ? &replay->sequence(static_cast<int64_t>(shown)) : nullptr;
  }
  void dropSessions() {
    session.reset();
    batch.reset();
    shown = 0;
  }
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
  std::shared_ptr<const BatchDiffReport> batch_diff;  // a batch's diff, every sequence's report
  void forgetInvestigation() {
    diff.reset();
    batch_diff.reset();
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
  state_->dropSessions();
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

const Session* SessionController::liveSession() const { return state_->live(); }

int64_t SessionController::batchSize() const {
  if (state_->batch) return static_cast<int64_t>(state_->batch->size());
  if (state_->replay) return state_->replay->sequences();
  return state_->session ? 1 : 0;
}

int64_t SessionController::shownSequence() const { return static_cast<int64_t>(state_->shown); }

void SessionController::showSequence(int64_t sequence) {
  require(sequence >= 0 && sequence < batchSize(),
          "show sequence " + std::to_string(sequence) + ": the batch has " + std::to_string(batchSize()) + " sequences");
  if (static_cast<size_t>(sequence) == state_->shown) return;
  state_->shown = static_cast<size_t>(sequence);
  state_->builder.reset();  // it follows one session's records incrementally
  state_->audit_target.reset();
  state_->audit_drafter.reset();
  if (state_->batch_diff) state_->diff = std::make_shared<const DiffReport>(state_->batch_diff->sequences[state_->shown]);
  if (state_->replay) {  // a batch trace: that sequence's record, with its own saved diff
    state_->replay_snapshot = SnapshotBuilder().build(*state_->replay, sequence);
    state_->diff = state_->replay_snapshot->diff;
  }
}

void SessionController::showReplay(std::shared_ptr<const SessionSnapshot> snapshot) {
  require(snapshot != nullptr, "showing a replay: no snapshot");
  state_->dropSessions();
  state_->builder.reset();
  state_->replay.reset();
  state_->forgetInvestigation();
  state_->diff = snapshot->diff;
  state_->prompt.clear();
  state_->replay_snapshot = std::move(snapshot);
}

bool SessionController::hasSession() const { return state_->live() != nullptr; }
bool SessionController::finished() const {
  if (state_->batch) return state_->batch->finished();
  return state_->session && state_->session->finished();
}

void SessionController::adoptModels(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Tokenizer> tokenizer,
                                    std::vector<int64_t> eos_ids, std::shared_ptr<const Drafter> drafter,
                                    std::string target_name) {
  require(target != nullptr, "adopting models: no target model");
  state_->dropSessions();
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
  if (spec.more_prompts.empty()) {
    startSession(std::move(prompt), spec.options);
  } else {
    std::vector<std::vector<int64_t>> prompts{std::move(prompt)};
    for (const std::string& text : spec.more_prompts) {
      prompts.push_back(state_->tokenizer->encode(text));
      require(!prompts.back().empty(), "starting a batch: prompt " + std::to_string(prompts.size() - 1) +
                                           " encodes to no tokens");
    }
    startBatch(std::move(prompts), spec.options);
  }
  state_->prompt = spec.prompt;
}

void SessionController::startBatch(std::vector<std::vector<int64_t>> prompts, const SessionOptions& options) {
  require(hasModels(), "starting a batch: no models loaded");
  auto batch = std::make_unique<BatchSession>(state_->target, state_->drafter, prompts, options, state_->eos_ids);
  state_->dropSessions();
  state_->batch = std::move(batch);
  state_->prompt.clear();
  state_->forgetInvestigation();
  state_->replay.reset();
  state_->replay_snapshot.reset();
  state_->builder.reset();
  spdlog::info("batch started: {} sequences, drafter {}, fault {}", prompts.size(), state_->drafter_name,
               faultInfo(options.fault).name);
}

void SessionController::startSession(std::vector<int64_t> prompt, const SessionOptions& options) {
  require(hasModels(), "starting a session: no models loaded");
  auto session = std::make_unique<Session>(state_->target, state_->drafter, std::move(prompt), options,
                                           state_->eos_ids);
  state_->dropSessions();
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
  if (finished()) return;
  if (state_->batch) state_->batch->stepPhase();
  else state_->session->stepPhase();
}

void SessionController::stepRound() {
  require(hasSession(), "step: no session");
  if (finished()) return;
  if (state_->batch) state_->batch->stepRound();
  else state_->session->stepRound();
}

void SessionController::runToEnd() {
  require(hasSession(), "run: no session");
  if (state_->batch) state_->batch->runToEnd();
  else state_->session->runToEnd();
}

void SessionController::run(const std::atomic<bool>& cancel,
                   const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round) {
  require(hasSession(), "run: no session");
  // Phase by phase, so that a stop takes effect within one phase.
  while (!finished() && !cancel.load()) {
    stepPhase();
    const Phase next = state_->batch ? state_->batch->nextPhase() : state_->session->nextPhase();
    const bool round_done = next == Phase::Draft || finished();
    if (round_done && after_round) after_round(snapshot());
  }
}

std::shared_ptr<const SessionSnapshot> SessionController::snapshot() {
  if (!state_->live()) {
    if (!state_->replay_snapshot) return nullptr;
    auto copy = std::make_shared<SessionSnapshot>(*state_->replay_snapshot);
    copy->audit_target = state_->audit_target;
    copy->audit_drafter = state_->audit_drafter;
    return copy;
  }
  auto built = state_->builder.build(*state_->live());
  std::shared_ptr<SessionSnapshot> snapshot = std::move(built);
  if (state_->batch) {
    std::vector<const std::vector<RoundRecord>*> sequences;
    for (size_t b = 0; b < state_->batch->size(); ++b) sequences.push_back(&state_->batch->sequence(b).rounds());
    snapshot->batch_accepted = batchAcceptance(sequences, snapshot->rounds.size());
    snapshot->shown_sequence = static_cast<int64_t>(state_->shown);
    // The batch is finished when every sequence is; the shown one may end first.
    snapshot->finished = state_->batch->finished();
  }
  snapshot->diff = state_->diff;
  snapshot->audit_target = state_->audit_target;
  snapshot->audit_drafter = state_->audit_drafter;
  snapshot->prompt = state_->prompt;
  for (CacheRole cache : {CacheRole::Target, CacheRole::Drafter}) {
    std::optional<PoolView> pool = poolView(cache);
    auto& slot = cache == CacheRole::Target ? snapshot->target_pool : snapshot->drafter_pool;
    if (pool) slot = std::make_shared<const PoolView>(std::move(*pool));
    std::optional<PoolHistory> history = poolHistory(cache);
    auto& history_slot = cache == CacheRole::Target ? snapshot->target_pool_history : snapshot->drafter_pool_history;
    if (history) history_slot = std::make_shared<const PoolHistory>(std::move(*history));
  }
  return snapshot;
}

std::vector<const Session*> SessionController::liveSequences() const {
  std::vector<const Session*> sequences;
  if (state_->batch) {
    for (size_t i = 0; i < state_->batch->size(); ++i) sequences.push_back(&state_->batch->sequence(i));
  } else if (state_->session) {
    sequences.push_back(state_->session.get());
  }
  return sequences;
}

std::optional<PoolView> SessionController::poolView(CacheRole cache) const { return poolViewOf(liveSequences(), cache); }

std::optional<PoolHistory> SessionController::poolHistory(CacheRole cache) const {
  return poolHistoryOf(liveSequences(), cache);
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
  if (state_->batch) return runBatchDiff(cancel);
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

const DiffReport& SessionController::runBatchDiff(const std::atomic<bool>* cancel) {
  BatchSession& batch = *state_->batch;
  require(batch.sequence(0).rounds().empty(), "diff: the batch has already been stepped; start a new one");
  const BatchDiffReport report = diffBatchLockstep(batch, DiffTolerances{}, cancel,
                                                   [this](int64_t id) { return state_->tokenText(id); });
  state_->batch_diff = std::make_shared<const BatchDiffReport>(report);
  state_->shown = report.first_broken.value_or(0);
  state_->builder.reset();
  state_->diff = std::make_shared<const DiffReport>(report.sequences[state_->shown]);
  spdlog::info("diff of a batch of {} ({}): {}", batch.size(), faultInfo(batch.sequence(0).options().fault).name,
               report.explanation());
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
  const Session* session = state_->live();
  const CausalLM* target = session ? &session->target() : nullptr;
  const CausalLM* drafter = session && session->drafter() ? session->drafter()->model() : nullptr;
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
  RootCauseOptions options;
  options.sequence = shownSequence();  // named in the root cause (0 for one sequence)
  return findRootCause(*record, options, [this](int64_t id) { return state_->tokenText(id); });
}

void SessionController::saveTrace(const std::string& path, const std::string& gui_state_json) {
  nlohmann::json gui = nlohmann::json::object();
  if (!gui_state_json.empty()) {
    gui = nlohmann::json::parse(gui_state_json, nullptr, false);
    if (gui.is_discarded()) gui = nlohmann::json::object();
  }
  if (state_->batch) {
    saveBatchTrace(path, gui);
  } else if (state_->session) {
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

void SessionController::saveBatchTrace(const std::string& path, const nlohmann::json& gui) {
  const BatchSession& batch = *state_->batch;
  nlohmann::json info;
  info["target"]["name"] = fs::path(state_->target_dir).filename().string();
  info["target"]["dir"] = state_->target_dir;
  info["gui"] = gui;
  info["gui"]["shown_sequence"] = state_->shown;
  info["prompt"] = state_->prompt;
  nlohmann::json diffs = nlohmann::json::array();  // every sequence's diff, in batch order
  if (state_->batch_diff) {
    for (const DiffReport& report : state_->batch_diff->sequences) diffs.push_back(toJson(report, true));
  }
  info["investigation"] = {{"fault", faultInfo(batch.sequence(0).options().fault).name},
                           {"diff", state_->diff ? toJson(*state_->diff, true) : nlohmann::json(nullptr)}};
  if (!diffs.empty()) info["investigation"]["sequence_diffs"] = diffs;
  writeTrace(path, captureTrace(batch, state_->tokenizer.get(), info));
}

std::shared_ptr<const SessionSnapshot> SessionController::openTrace(const std::string& path, std::string* gui_state_json) {
  auto trace = std::make_unique<TraceData>(readTrace(path));
  // A batch trace opens on the sequence shown when it was saved.
  int64_t shown = 0;
  if (trace->info.contains("gui") && trace->info["gui"].is_object()) {
    const nlohmann::json& saved = trace->info["gui"].value("shown_sequence", nlohmann::json(0));
    if (saved.is_number_integer() && saved.get<int64_t>() > 0 && saved.get<int64_t>() < trace->sequences()) {
      shown = saved.get<int64_t>();
    }
  }
  SnapshotBuilder builder;
  auto snapshot = builder.build(*trace, shown);
  if (gui_state_json) {
    *gui_state_json = trace->info.contains("gui") ? trace->info["gui"].dump() : std::string("{}");
  }
  // Only now, with the file read and converted, drop the live session.
  state_->dropSessions();
  state_->builder.reset();
  state_->shown = static_cast<size_t>(shown);
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
