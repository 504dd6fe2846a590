#include "app/cli/session_setup.h"

#include "app/cli/cli_common.h"
#include "core/error.h"

namespace kvscope::cli {

namespace {
std::shared_ptr<ModelBundle> loadShared(const std::string& dir, WeightResidency weights) {
  return std::make_shared<ModelBundle>(loadModelBundle(dir, computeOptions(), weights));
}

// Keeps the bundle alive as long as the model is used.
std::shared_ptr<const CausalLM> sharedModel(const std::shared_ptr<ModelBundle>& bundle) {
  return std::shared_ptr<const CausalLM>(bundle, bundle->model.get());
}
}  // namespace

SessionSetup parseSessionSetup(Args& args) {
  SessionSetup setup;
  const WeightResidency weights = weightResidency(args);
  setup.target = loadShared(modelDirectory(args, "target", "target"), weights);
  const auto ngram = args.value("ngram");
  const auto drafter_dir = args.value("drafter");
  if (ngram && drafter_dir) throw Error("give either --drafter DIR or --ngram N, not both");
  if (ngram) {
    const int64_t n = args.integer("ngram", 3);
    setup.drafter_impl = std::make_shared<NgramDrafter>(n);
    setup.drafter_label = "n-gram (n <= " + std::to_string(n) + ")";
  } else {
    const std::string dir = drafter_dir ? *drafter_dir : modelDirectory(args, "drafter", "drafter");
    setup.drafter = loadShared(dir, weights);
    setup.drafter_impl = std::make_shared<ModelDrafter>(sharedModel(setup.drafter), dir);
    setup.drafter_label = dir;
  }
  setup.prompts = promptBatch(args, *setup.target);
  setup.prompt = setup.prompts.front();
  // Every flag defaults to SessionOptions' own default (core/decode/session_options.h).
  SessionOptions& o = setup.options;
  o.adaptive_gamma = args.flag("adaptive");
  o.gamma = args.integer("gamma", o.gamma);
  o.draft_confidence = args.number("draft-confidence", o.draft_confidence);
  o.max_new_tokens = args.integer("max-new", o.max_new_tokens);
  const std::string cache = args.value("cache").value_or(o.use_cache ? "on" : "off");
  if (cache != "on" && cache != "off") throw Error("--cache must be on or off, got '" + cache + "'");
  o.use_cache = cache == "on";
  o.sampling = samplingSettings(args);
  o.seed = static_cast<uint64_t>(args.integer("seed", static_cast<int64_t>(o.seed)));
  o.bookkeeping = parseBookkeeping(args.value("bookkeeping").value_or(bookkeepingName(o.bookkeeping)));
  o.ignore_eos = args.flag("ignore-eos");
  o.fault = parseFault(args.value("fault").value_or(faultInfo(o.fault).name));
  o.trace_budget_mb = args.integer("trace-budget", o.trace_budget_mb);
  if (const auto evict = args.value("evict")) o.eviction = parseSessionEviction(*evict);
  if (const auto layout = args.value("cache-layout")) o.cache_layout = parseStorageLayout(*layout);
  if (const auto layout = args.value("batch-layout")) o.batch_layout = parseBatchLayout(*layout);
  o.validate();
  return setup;
}

std::unique_ptr<Session> SessionSetup::makeSession(bool use_cache) const {
  SessionOptions o = options;
  o.use_cache = use_cache;
  if (!use_cache) o.eviction.reset();  // the uncached run is the full-cache reference
  return std::make_unique<Session>(std::shared_ptr<const CausalLM>(target, target->model.get()), drafter_impl, prompt,
                                   o, target->eos_ids);
}

std::unique_ptr<BatchSession> SessionSetup::makeBatchSession(bool use_cache) const {
  SessionOptions o = options;
  o.use_cache = use_cache;
  if (!use_cache) o.eviction.reset();
  return std::make_unique<BatchSession>(std::shared_ptr<const CausalLM>(target, target->model.get()), drafter_impl,
                                        prompts, o, target->eos_ids);
}

std::unique_ptr<SessionController> SessionSetup::makeController() const {
  auto controller = std::make_unique<SessionController>();
  controller->adoptModels(std::shared_ptr<const CausalLM>(target, target->model.get()),
                          std::shared_ptr<const Tokenizer>(target, target->tokenizer.get()), target->eos_ids,
                          drafter_impl, target->dir);
  SessionOptions o = options;
  o.use_cache = true;
  if (batched()) {
    controller->startBatch(prompts, o);
  } else {
    controller->startSession(prompt, o);
  }
  return controller;
}

}  // namespace kvscope::cli
