#pragma once
// The controller both front ends drive: it owns the models and one session
// (or an opened trace), steps it, hands out snapshots, and runs the diff and
// the audit. The GUI's worker thread and kvscope-cli's diff/audit use the same
// calls. Qt-free and torch-free in its interface (libtorch stays behind the
// pimpl). Not thread-safe: one thread owns it; only a cancel flag may be set
// from elsewhere.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/audit/diff_report.h"
#include "core/decode/session_options.h"
#include "core/model/weight_residency.h"
#include "core/snapshot/snapshot.h"

namespace kvscope {

class CausalLM;
class Drafter;
class Session;
class Tokenizer;

enum class DrafterKind { Model, Ngram, None };

struct ModelSpec {
  std::string target_dir;   // empty: the default (bundled, else the test fixture)
  DrafterKind drafter_kind = DrafterKind::Model;
  std::string drafter_dir;  // empty: the default
  int64_t max_ngram = 3;
  // 16-bit checkpoints stay 16-bit in memory unless fp32 (weight_residency.h).
  WeightResidency weights = WeightResidency::Stored;
};

// A session to start from text: the prompt and the options (declared once,
// with their defaults, in core/decode/session_options.h).
struct SessionSpec {
  std::string prompt;
  SessionOptions options;
  // More prompts decoded together with `prompt` as one batch
  // (core/decode/batch_session.h); empty: one sequence.
  std::vector<std::string> more_prompts;
};

struct LoadResult {
  std::string target_dir;
  std::string drafter_dir;  // empty for n-gram / none
  std::string drafter_name;
  int64_t vocab_size = 0;
  std::vector<std::string> notes;  // e.g. "bundled models not found; using the test fixtures"
};

// The bundled pair (resources/models, or KVSCOPE_MODELS_DIR). Throws Error
// naming the directories searched and the set-up command when it is missing:
// production code never falls back to test fixtures.
struct DefaultModels {
  std::string target_dir;
  std::string drafter_dir;
};
DefaultModels defaultModelDirectories();

class SessionController {
 public:
  // step, total, what is being done (for a progress bar)
  using Progress = std::function<void(int step, int total, const std::string& what)>;

  SessionController();
  ~SessionController();
  SessionController(const SessionController&) = delete;
  SessionController& operator=(const SessionController&) = delete;

  // Throws Error; on failure the previously loaded models stay in place.
  LoadResult loadModels(const ModelSpec& spec, const Progress& progress = {});
  // Models loaded elsewhere (the CLI's); the tokenizer may be null.
  void adoptModels(std::shared_ptr<const CausalLM> target, std::shared_ptr<const Tokenizer> tokenizer,
                   std::vector<int64_t> eos_ids, std::shared_ptr<const Drafter> drafter, std::string target_name);
  bool hasModels() const;
  // The target model of the live session (null with none loaded, or while
  // replaying a trace, whose tokens may come from another model): for
  // explanations (attention_explanation.h) on the thread that owns this.
  std::shared_ptr<const CausalLM> liveTarget() const;
  // What is loaded, for checking a capture against it and writing one:
  // null / empty when nothing is; the drafter's model is null for n-gram
  // drafting or none.
  struct LoadedModels {
    std::shared_ptr<const CausalLM> target;
    std::shared_ptr<const CausalLM> drafter;
    std::shared_ptr<const Tokenizer> tokenizer;
    std::string target_dir;
    std::string drafter_dir;
  };
  LoadedModels loaded() const;
  // The live session (null while replaying a trace or a capture, or with
  // none started): File > Save Capture writes its record. In a batch, the
  // shown sequence's session.
  const Session* liveSession() const;
  // A batch (live, or an opened batch trace): how many sequences it holds
  // (1 for one sequence, 0 with neither a live session nor a trace), and
  // which one the snapshots show. showSequence throws Error for a sequence
  // outside the batch.
  int64_t batchSize() const;
  int64_t shownSequence() const;
  void showSequence(int64_t sequence);
  // Shows a snapshot made elsewhere (an opened capture) in place of the live
  // session: replay only, nothing to step; the models stay loaded.
  void showReplay(std::shared_ptr<const SessionSnapshot> snapshot);
  // Throws Error (bad prompt, bad options); the previous session stays.
  void startSession(const SessionSpec& spec);
  void startSession(std::vector<int64_t> prompt, const SessionOptions& options);
  // Several prompts decoded together (each prompt's ids); shows sequence 0.
  void startBatch(std::vector<std::vector<int64_t>> prompts, const SessionOptions& options);
  bool hasSession() const;
  bool finished() const;

  void stepPhase();
  void stepRound();
  void runToEnd();
  // Steps until finished or cancelled (checked between phases); calls
  // after_round with a snapshot after each completed round.
  void run(const std::atomic<bool>& cancel,
           const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round);

  std::shared_ptr<const SessionSnapshot> snapshot();
  // The block pool the live session's (or batch's) `cache` caches share, as
  // the run left it (core/snapshot/pool_view.h), and its history, which gives
  // the pool at any moment (core/snapshot/pool_history.h); nullopt for a
  // contiguous cache, a replay, or no session. Snapshots carry the same.
  std::optional<PoolView> poolView(CacheRole cache) const;
  std::optional<PoolHistory> poolHistory(CacheRole cache) const;

  // Starts a session with `spec` (the cache forced on) and runs it to the end
  // in lockstep with an uncached recomputation, then finds the root cause;
  // the snapshots then carry the report. Throws Error (no models, bad spec).
  // A batch diffs every sequence (core/audit/batch_diff.h), then shows the
  // one whose root cause happened first, and returns that sequence's report.
  const DiffReport& runDiff(const SessionSpec& spec, const std::atomic<bool>& cancel);
  // The same on the session just started (nothing stepped yet).
  const DiffReport& runDiff(const std::atomic<bool>* cancel = nullptr);
  // Audits both caches at a recorded moment (values too when the models of
  // this session are loaded); the snapshots carry it. The session is not
  // stepped. Throws Error when the moment was not recorded.
  std::vector<CacheAudit> auditAt(const Moment& moment);
  // The first cache operation that broke the contract (structure and stored
  // values; appended values too when a diff found a divergence).
  std::optional<RootCause> rootCause() const;

  // .kvtrace files. gui_state_json (a JSON object, may be empty) is stored
  // with the trace and handed back on open (cursor, bookmarks). The fault,
  // the prompt and the diff report with its root cause are saved too. Saving
  // uses the live session, or the opened trace when replaying one.
  void saveTrace(const std::string& path, const std::string& gui_state_json);
  // Replaces the live session with the file's record (replay only: the
  // models stay loaded for the next session). Throws Error for a bad file.
  std::shared_ptr<const SessionSnapshot> openTrace(const std::string& path, std::string* gui_state_json);

 private:
  const DiffReport& runBatchDiff(const std::atomic<bool>* cancel);
  // Every sequence's record, the shown one and every sequence's diff.
  void saveBatchTrace(const std::string& path, const nlohmann::json& gui);
  // The live session, or every sequence of the live batch in order; empty without one.
  std::vector<const Session*> liveSequences() const;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvscope
