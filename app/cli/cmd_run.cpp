// kvscope-cli run: speculative decoding, one JSON line per round and the
// result as the last with --json, coloured text and metrics (no JSON)
// otherwise; optionally a .kvtrace or a .kvcapture of the session.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>

#include "app/cli/batch_run.h"
#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/compressed_drafting.h"
#include "app/cli/session_setup.h"
#include "app/cli/token_printer.h"
#include "core/check/capture_writer.h"
#include "core/control/trace_capture.h"
#include "core/bench/measured_speedup.h"
#include "core/error.h"
#include "core/trace/trace_file.h"
#include "core/trace/trace_json.h"

namespace kvscope::cli {
namespace {

double megabytes(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// What the views keep of the verify passes, and what the budget dropped.
void printBudget(std::ostream& out, const RecordBudget& budget) {
  out << "recorded attention + logits kept: " << megabytes(budget.keptBytes()) << " MB";
  if (budget.budgetBytes() > 0) out << " of a " << megabytes(budget.budgetBytes()) << " MB trace budget";
  out << "\n";
  if (budget.roundsWithoutAttention() + budget.roundsWithoutLogits() > 0) {
    out << "over budget: the " << budget.roundsWithoutAttention() << " oldest rounds lost their attention, "
        << budget.roundsWithoutLogits() << " their logits (--trace-budget MB, 0: no limit)\n";
  }
}

// What the eviction policy did: its Evict events, the rows they masked, the
// entries no head reads any more.
struct EvictionSummary {
  int64_t events = 0;
  int64_t masked = 0;   // (entry, layer, kv head) rows
  int64_t evicted = 0;  // entries masked in every layer and kv head
};

EvictionSummary summarizeEvictions(const Session& session) {
  EvictionSummary summary;
  for (const CacheEvent& e : session.events().events()) {
    if (!e.masksRows()) continue;
    ++summary.events;
    summary.masked += static_cast<int64_t>(e.masked.size());
    summary.evicted += static_cast<int64_t>(e.removed.size());
  }
  return summary;
}

void printEvictions(std::ostream& out, const Session& session) {
  if (!session.options().eviction) return;
  const EvictionSummary s = summarizeEvictions(session);
  const KvCache* cache = session.targetCache();
  out << "eviction " << session.options().eviction->describe() << ": " << s.events << " Evict events masked " << s.masked
      << " (layer, kv head) rows; " << s.evicted << " entries evicted from every head";
  if (cache) out << "; layer 0, kv head 0 reads " << cache->keptRows(0, 0) << " of its " << cache->length(0) << " rows";
  out << "\n";
}

nlohmann::json budgetJson(const RecordBudget& budget) {
  return {{"budget_mb", megabytes(budget.budgetBytes())},
          {"kept_mb", megabytes(budget.keptBytes())},
          {"rounds_without_attention", budget.roundsWithoutAttention()},
          {"rounds_without_logits", budget.roundsWithoutLogits()}};
}

int runRun(Args& args) {
  if (args.value("drafter-compressed")) return runCompressedDrafting(args);
  if (args.value("draft-cache")) throw Error("--draft-cache is for --drafter-compressed POLICY:BUDGET");
  const bool json = args.flag("json");
  const auto trace_path = args.value("trace");
  const auto capture_path = args.value("capture");
  const bool baseline = !args.flag("no-baseline");
  SpeedupPlan plan;
  plan.trials = static_cast<int>(args.integer("speedup-trials", plan.trials));
  if (plan.trials < 2 || plan.trials > 1000) {
    throw Error("--speedup-trials must be 2-1000 (the median of one trial has no spread to judge it by), got " +
                std::to_string(plan.trials));
  }
  SessionSetup setup = parseSessionSetup(args);
  args.finish();
  if (setup.batched()) return runBatch(setup, {json, trace_path, capture_path, baseline});

  auto session = setup.makeSession(setup.options.use_cache);
  const auto start = std::chrono::steady_clock::now();
  size_t printed = 0;
  while (!session->finished()) {
    session->stepRound();
    for (; json && printed < session->rounds().size(); ++printed) {
      if (session->rounds()[printed].index > 0) std::cout << toJson(session->rounds()[printed]).dump() << "\n";
    }
  }
  const double session_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const Metrics metrics = session->metrics();
  // The shown session is not a trial: it streams its rounds, and it is the
  // process's first run. The measurement times fresh sessions of its own.
  std::optional<MeasuredSpeedup> speedup;
  if (baseline) {
    speedup = measureSpeedup(std::shared_ptr<const CausalLM>(setup.target, setup.target->model.get()),
                             setup.drafter_impl, setup.prompt, session->options(), setup.target->eos_ids, plan);
  }

  if (trace_path) {
    writeTrace(*trace_path, captureTrace(*session, setup.target->tokenizer.get(),
                                         nlohmann::json::object({{"target_dir", setup.target->dir}, {"drafter_dir", setup.drafter_label}})));
  }
  if (capture_path) {
    writeSessionCapture(*capture_path, session->record(), {setup.target->dir, setup.target->model.get()},
                        {setup.drafter ? setup.drafter->dir : "", setup.drafter ? setup.drafter->model.get() : nullptr},
                        std::string("kvscope-cli run (fault ") + faultInfo(setup.options.fault).name + ")");
  }
  const auto ids = session->generated();
  if (!json) {
    printColouredRounds(std::cout, *session, *setup.target->tokenizer, isatty(STDOUT_FILENO) != 0);
    printMetrics(std::cout, metrics);
    if (speedup) std::cout << "measured speedup over autoregressive decoding: " << describeSpeedup(*speedup) << "\n";
    printBudget(std::cout, session->recordBudget());
    printEvictions(std::cout, *session);
    if (trace_path) std::cout << "trace written to " << *trace_path << "\n";
    if (capture_path) std::cout << "capture written to " << *capture_path << " (check it: kvscope-cli check " << *capture_path << ")\n";
  }
  nlohmann::json result = toJson(metrics);
  result["ids"] = ids;
  result["text"] = setup.target->tokenizer->decode(ids);
  result["prompt_ids"] = setup.prompt;
  result["session_ms"] = session_ms;
  result["trace_budget"] = budgetJson(session->recordBudget());
  if (setup.options.eviction) {
    const EvictionSummary s = summarizeEvictions(*session);
    result["eviction"] = {{"spec", setup.options.eviction->describe()}, {"events", s.events},
                          {"masked_rows", s.masked}, {"evicted_entries", s.evicted}};
  }
  if (speedup) {
    result["baseline_ms"] = speedup->plain_ms;         // medians of the trials
    result["measured_speedup"] = speedup->median;
    result["speedup"] = toJson(*speedup);             // the trials, and whether they measure anything
  }
  if (json) printJson(result);
  return 0;
}

const CommandRegistrar kRegister{
    "run",
    "run [--target DIR] [--drafter DIR | --ngram N] (--prompt TEXT | --prompt-ids 1,2,3 | --prompts FILE) [--gamma G | --adaptive]\n"
    "           [--draft-confidence P]   (a round's drafting stops after a draft the drafter gave less than P, as\n"
    "           Hugging Face's assistant_confidence_threshold; 0, the default: always gamma drafts)\n"
    "           [--max-new N] [--cache on|off] [--greedy | --temperature T --top-k K --top-p P] [--seed S]\n"
    "           [--bookkeeping exact|seed] [--ignore-eos] [--fault NAME] [--trace out.kvtrace] [--trace-budget MB]\n"
    "           [--capture out.kvcapture]   (the caches in the format any engine writes: kvscope-cli check reads it)\n"
    "           [--evict POLICY:BUDGET[:every=N]] [--no-baseline | --speedup-trials N] [--weights stored|fp32] [--json]\n"
    "           [--cache-layout contiguous|paged[:BLOCK]]   (paged: K/V in a block pool the batch's sequences share)\n"
    "           [--batch-layout ragged|padded]   (padded: prompts left-padded to the longest, every batched forward\n"
    "           as wide as its widest sequence, pads masked and dropped, as a [B, T] engine does)\n"
    "           the speedup: the session against the same session without its drafter (same recording, threads),\n"
    "           1 warm-up pair, N timed pairs (5), median; 'too short to measure' below 32 new tokens or when the\n"
    "           trials spread wider than the effect\n"
    "           a batch: --prompt or --prompt-ids repeated (or --prompts FILE, one prompt per line) decodes every\n"
    "           sequence together, drafts and verifies as batched forwards, each row accepting its own drafts;\n"
    "           --json reports one object per row under \"sequences\"\n"
    "           --evict: token eviction on the target's cache after the prefill (and every N rounds), e.g.\n"
    "           h2o:0.25:every=4 or streaming:64:sinks=4; policies as in `compress`; traces carry the Evict events\n"
    "       run [--target DIR] --drafter-compressed POLICY:BUDGET[:sinks=N...] [--draft-cache compacted|masked|rerotated]\n"
    "           (--prompt TEXT | --prompt-ids 1,2,3) [--gamma G] [--max-new N] [--ignore-eos] [--no-baseline] [--json]\n"
    "           the target drafts for itself over its cache compressed by the policy (compacted: only the kept rows;\n"
    "           masked: the keep mask; rerotated: kept keys moved to contiguous positions, RoPE models) and verifies\n"
    "           over the full cache: greedy, the output is the target's; prints alpha, tokens/s and the speedup",
    runRun};

}  // namespace
}  // namespace kvscope::cli
