#pragma once
// The one controller the GUI drives: loads a target/drafter pair, starts a
// session, steps it and hands out snapshots. Qt-free and torch-free in its
// interface (libtorch stays behind the pimpl). Not thread-safe: one thread
// (the GUI's worker) owns it; only the cancel flag may be set from elsewhere.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/trace/snapshot.h"

namespace kvscope {

enum class DrafterKind { Model, Ngram, None };

struct UiModelSpec {
  std::string target_dir;   // empty: the default (bundled, else the test fixture)
  DrafterKind drafter_kind = DrafterKind::Model;
  std::string drafter_dir;  // empty: the default
  int64_t max_ngram = 3;
};

struct UiSessionSpec {
  std::string prompt;
  int64_t gamma = 4;
  bool adaptive_gamma = false;
  int64_t max_new_tokens = 48;
  bool use_cache = true;
  bool greedy = true;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::string bookkeeping = "exact";  // "exact" | "seed"
  bool ignore_eos = false;
  std::string fault = "none";  // a name from allFaults() (core/cache/fault.h)
};

struct UiLoadResult {
  std::string target_dir;
  std::string drafter_dir;  // empty for n-gram / none
  std::string drafter_name;
  int64_t vocab_size = 0;
  std::vector<std::string> notes;  // e.g. "bundled models not found; using the test fixtures"
};

// The bundled pair when present, else tests/fixtures' llama-tiny pair.
struct DefaultModels {
  std::string target_dir;
  std::string drafter_dir;
  bool bundled = false;
  std::string note;  // why the fallback was taken
};
DefaultModels defaultModelDirectories();

class UiEngine {
 public:
  // step, total, what is being done (for a progress bar)
  using Progress = std::function<void(int step, int total, const std::string& what)>;

  UiEngine();
  ~UiEngine();
  UiEngine(const UiEngine&) = delete;
  UiEngine& operator=(const UiEngine&) = delete;

  // Throws Error; on failure the previously loaded models stay in place.
  UiLoadResult loadModels(const UiModelSpec& spec, const Progress& progress = {});
  bool hasModels() const;
  // Throws Error (bad prompt, bad options); the previous session stays.
  void startSession(const UiSessionSpec& spec);
  bool hasSession() const;
  bool finished() const;

  void stepPhase();
  void stepRound();
  // Steps until finished or cancelled (checked between phases); calls
  // after_round with a snapshot after each completed round.
  void run(const std::atomic<bool>& cancel,
           const std::function<void(std::shared_ptr<const SessionSnapshot>)>& after_round);

  std::shared_ptr<const SessionSnapshot> snapshot();

  // Starts a session with `spec` (the cache forced on) and runs it to the end
  // in lockstep with an uncached recomputation; the snapshots then carry the
  // diff. Throws Error (no models, bad spec).
  void runDiff(const UiSessionSpec& spec, const std::atomic<bool>& cancel);
  // Audits both caches as they stand now (the target first); the snapshots
  // carry the result until the next step. Throws Error without a session.
  void auditNow();

  // .kvtrace files. gui_state_json (a JSON object, may be empty) is stored
  // with the trace and handed back on open (cursor, bookmarks). Saving uses
  // the live session, or the opened trace when replaying one.
  void saveTrace(const std::string& path, const std::string& gui_state_json);
  // Replaces the live session with the file's record (replay only: the
  // models stay loaded for the next session). Throws Error for a bad file.
  std::shared_ptr<const SessionSnapshot> openTrace(const std::string& path, std::string* gui_state_json);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvscope
