#pragma once
// The options of a speculative session, declared once: kvscope-cli's flags,
// the GUI's Session panel, lesson files and the options a trace records all
// read and write this struct, with these defaults and these limits. Plain
// data without libtorch, so front ends include it without the engine.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/cache/fault.h"
#include "core/cache/storage_layout.h"
#include "core/decode/sampling_settings.h"
#include "core/decode/session_eviction.h"
#include "core/error.h"
#include "core/trace/trace_types.h"

namespace kvscope {

// The ranges validate() accepts (gamma, new tokens, trace budget), and the
// bounds forms and files read top-k and the seed within; the Session panel's
// inputs and readSessionOptions use the same numbers.
struct SessionLimits {
  static constexpr int64_t kMaxGamma = 64;
  static constexpr int64_t kMaxNewTokens = 1'000'000;
  static constexpr int64_t kMaxTraceBudgetMb = int64_t{1} << 30;
  static constexpr int64_t kMaxTopK = int64_t{1} << 30;  // beyond any vocabulary: top-k off in effect
  static constexpr int64_t kMaxSeed = int64_t{1} << 30;  // what a spin box holds, and a JSON number exactly
  static constexpr int64_t kMaxBatch = 64;  // sequences decoded together (core/decode/batch_session.h)
};

// How a batch's sequences share a forward (docs/batching.md): ragged (each
// sequence feeds its own inputs as they are; no pads, no mask) or padded
// (prompts left-padded to the longest, every call as wide as its widest
// sequence, pads masked and dropped, as a [B, T] engine does).
enum class BatchLayout { Ragged, Padded };
const char* batchLayoutName(BatchLayout layout);  // "ragged", "padded"
BatchLayout parseBatchLayout(const std::string& text);  // throws Error naming the text

struct SessionOptions {
  int64_t gamma = 4;           // drafts per round (the start value when adaptive)
  bool adaptive_gamma = false; // +2 after a fully accepted round, -1 otherwise
  int64_t gamma_min = 1;
  int64_t gamma_max = 16;
  // Drafting stops early after a draft the drafter gave a probability below
  // this (Hugging Face's assistant_confidence_threshold; it defaults to 0.4
  // there): unlikely drafts cost a drafter step and a verify row each and
  // are seldom accepted. 0: every round drafts gamma tokens.
  double draft_confidence = 0.0;
  int64_t max_new_tokens = 64;
  bool use_cache = true;
  SamplingSettings sampling;
  uint64_t seed = 0;
  Bookkeeping bookkeeping = Bookkeeping::Exact;
  bool ignore_eos = false;
  bool record_attention = true;  // verify-pass attention of every layer, per round
  bool record_logits = true;     // verify-pass logits, per round
  // Bytes of attention + logits kept for the views; over it the oldest rounds
  // lose their attention, then their logits (core/trace/record_budget.h).
  // 0: no limit.
  int64_t trace_budget_mb = 1024;
  Fault fault = Fault::None;     // an injected cache bug (core/cache/fault.h, fault_policy.h)
  // Token eviction on the target's cache (core/decode/session_eviction.h);
  // needs the cache on. nullopt: the full cache.
  std::optional<SessionEviction> eviction;
  // How the caches store their rows: contiguous, or blocks of a pool the
  // sequences of a batch share (docs/paged-cache.md). Logits are the same.
  StorageLayout cache_layout;
  // How a batch's forwards are laid out; one sequence alone is never padded.
  BatchLayout batch_layout = BatchLayout::Ragged;

  void validate() const;  // throws Error naming the bad parameter
};

// The options as one JSON object, every field named as below: what a trace
// records under info.options and what a lesson page's "session" holds.
//   gamma, adaptive_gamma, gamma_min, gamma_max, draft_confidence, max_new_tokens, use_cache,
//   sampling ("greedy", "sample", or the description sampling.describe()
//   gives), temperature, top_k, top_p, seed, bookkeeping ("exact" | "seed"),
//   ignore_eos, record_attention, record_logits, trace_budget_mb,
//   fault ("none" or a name from allFaults()), eviction ("none" or the
//   --evict form, "h2o:0.25:every=4"), cache_layout ("contiguous" or
//   "paged:BLOCK"), batch_layout ("ragged" or "padded").
nlohmann::json sessionOptionsJson(const SessionOptions& options);

// What readSessionOptions refuses: the field (empty for the object as a
// whole) and why, so that a reader with its own paths (a lesson file's
// "pages[2].session.gamma") names the field its way.
class SessionOptionError : public Error {
 public:
  SessionOptionError(std::string field, const std::string& message)
      : Error(field.empty() ? message : "session option '" + field + "': " + message), field_(std::move(field)),
        reason_(message) {}
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

// Reads such an object over `base`: a field it does not name keeps base's
// value. Throws SessionOptionError naming the field for an unknown key, a
// wrong type or a value out of range, and for options validate() refuses.
SessionOptions readSessionOptions(const nlohmann::json& object, SessionOptions base = {});

}  // namespace kvscope
