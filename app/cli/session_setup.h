#pragma once
// Builds a speculative Session from the options shared by `run`, `diff` and
// `audit`: --target DIR (--drafter DIR | --ngram N) (--prompt T | --prompt-ids ..., repeated for a batch | --prompts FILE)
// --gamma G | --adaptive, --draft-confidence P, --max-new N, --cache on|off, sampling, --seed,
// --bookkeeping exact|seed, --ignore-eos, --trace-budget MB,
// --evict POLICY:BUDGET[:every=N] (core/decode/session_eviction.h),
// --weights stored|fp32 (core/model/weight_residency.h),
// --cache-layout contiguous|paged[:BLOCK] (docs/paged-cache.md).
#include <memory>
#include <string>

#include "app/cli/args.h"
#include "core/control/session_controller.h"
#include "core/decode/batch_session.h"
#include "core/decode/session.h"
#include "core/model/model_bundle.h"

namespace kvscope::cli {

struct SessionSetup {
  std::shared_ptr<ModelBundle> target;
  std::shared_ptr<ModelBundle> drafter;  // null for the n-gram drafter
  std::shared_ptr<const Drafter> drafter_impl;
  std::vector<int64_t> prompt;  // the first (the only one, unless batched)
  std::vector<std::vector<int64_t>> prompts;  // one per sequence of the batch
  SessionOptions options;
  std::string drafter_label;

  std::unique_ptr<Session> makeSession(bool use_cache) const;
  // Every prompt decoded together (core/decode/batch_session.h).
  std::unique_ptr<BatchSession> makeBatchSession(bool use_cache) const;
  bool batched() const { return prompts.size() > 1; }
  // The controller the GUI drives, holding these models and a new session
  // (with the cache on) ready to step or diff.
  std::unique_ptr<SessionController> makeController() const;
};

SessionSetup parseSessionSetup(Args& args);

}  // namespace kvscope::cli
