#include "app/cli/compressed_drafting.h"

#include <iomanip>
#include <iostream>
#include <string>

#include "app/cli/cli_common.h"
#include "core/bench/timing.h"
#include "core/compress/self_speculation.h"
#include "core/decode/autoregressive.h"
#include "core/decode/session_eviction.h"
#include "core/error.h"

namespace kvscope::cli {

namespace {

// run's options that compressed-cache self-speculation does not offer (it
// runs a greedy Session of its own, with the target as its drafter): refused
// by name rather than silently ignored.
void refuseSessionOptions(Args& args) {
  const char* why = " is not available with --drafter-compressed (the target drafts for itself over its compressed "
                    "cache)";
  for (const char* option : {"drafter", "ngram", "cache", "bookkeeping", "fault", "trace", "trace-budget", "evict"}) {
    if (args.value(option)) throw Error(std::string("--") + option + why);
  }
  if (args.flag("adaptive")) throw Error(std::string("--adaptive") + why);
  for (const char* option : {"temperature", "top-k", "top-p", "seed"}) {
    if (args.value(option)) {
      throw Error(std::string("--") + option +
                  ": --drafter-compressed is greedy only (a draft is accepted when it is the target's argmax); "
                  "sampled self-speculation is not supported yet");
    }
  }
  args.flag("greedy");  // the only mode: accepted and meaningless
}

// --evict's parser, with its messages naming this option.
SessionEviction parseDrafterSpec(const std::string& text) {
  SessionEviction spec;
  try {
    spec = parseSessionEviction(text);
  } catch (const Error& e) {
    std::string message = e.what();
    const std::string from = "--evict", to = "--drafter-compressed";
    for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size())) {
      message.replace(at, from.size(), to);
    }
    throw Error(message);
  }
  if (spec.recompress_every > 0) {
    throw Error("--drafter-compressed compresses the drafting cache once, after the prefill; every=N is --evict's");
  }
  return spec;
}

struct Timed {
  GenerateResult baseline;
  double baseline_ms = 0;
};

// Plain greedy decoding of the target: the output to reproduce and the time to beat.
Timed greedyBaseline(const ModelBundle& target, const std::vector<int64_t>& prompt, int64_t max_new, bool ignore_eos) {
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = ignore_eos;
  Timed timed;
  timed.baseline_ms = elapsedMs([&] { timed.baseline = generateAutoregressive(*target.model, prompt, options, target.eos_ids); });
  return timed;
}

// One untimed prefill and decode step first: the process's first forwards
// pay for thread pools and allocations, which would otherwise count against
// whichever of the two timed runs goes first.
void warmUp(const CausalLM& model, const std::vector<int64_t>& prompt) {
  GenerateOptions options;
  options.max_new_tokens = 2;
  options.ignore_eos = true;
  generateAutoregressive(model, prompt, options, {});
}

void printSummary(std::ostream& out, const SelfSpeculationResult& r, const std::string& spec, DraftCacheLayout layout,
                  double session_ms) {
  out << std::fixed << std::setprecision(3);
  out << "drafter: the target over its compressed cache (" << spec << ", " << draftCacheLayoutName(layout)
      << "): layer 0 drafts over " << r.draft_rows << " of the prefill's " << r.full_rows << " rows per kv head\n";
  out << "rounds " << r.rounds << ", generated " << r.tokens.size() << " tokens, drafted " << r.drafted << ", accepted "
      << r.accepted << "\n";
  out << "alpha (accepted / drafted) " << r.alpha << ", tokens per verify "
      << (r.rounds > 0 ? static_cast<double>(r.accepted + r.rounds) / static_cast<double>(r.rounds) : 0.0) << "\n";
  out << "time: drafting " << r.draft_seconds * 1000 << " ms, verifying " << r.verify_seconds * 1000 << " ms; "
      << static_cast<double>(r.tokens.size()) / (session_ms / 1000) << " tokens/s\n";
}

}  // namespace

int runCompressedDrafting(Args& args) {
  const bool json = args.flag("json");
  const bool baseline = !args.flag("no-baseline");
  const std::string spec_text = *args.value("drafter-compressed");
  refuseSessionOptions(args);
  const SessionEviction eviction = parseDrafterSpec(spec_text);
  SelfSpeculationOptions options;
  options.layout = parseDraftCacheLayout(args.value("draft-cache").value_or("compacted"));
  options.gamma = args.integer("gamma", options.gamma);
  options.max_new = args.integer("max-new", options.max_new);
  const bool ignore_eos = args.flag("ignore-eos");
  const ModelBundle target = loadModelBundle(modelDirectory(args, "target", "target"), computeOptions(),
                                             weightResidency(args));
  const std::vector<int64_t> prompt = promptIds(args, target);
  args.finish();
  if (!ignore_eos) options.eos_ids = target.eos_ids;
  CompressionSpec spec;
  spec.eviction = eviction.settings;

  warmUp(*target.model, prompt);
  SelfSpeculationResult r;
  const double session_ms = elapsedMs([&] { r = runSelfSpeculation(*target.model, prompt, spec, options); });
  const Timed timed = baseline ? greedyBaseline(target, prompt, options.max_new, ignore_eos) : Timed{};
  const std::string text = target.tokenizer->decode(r.tokens);
  if (!json) {
    std::cout << target.tokenizer->decode(prompt) << text << "\n";
    printSummary(std::cout, r, eviction.describe(), options.layout, session_ms);
    if (baseline) {
      std::cout << "measured speedup over autoregressive decoding: " << timed.baseline_ms / session_ms << " ("
                << timed.baseline_ms << " ms vs " << session_ms << " ms); the output "
                << (timed.baseline.ids == r.tokens ? "equals" : "DIFFERS FROM (a bug)") << " the target's greedy output\n";
    }
  }
  nlohmann::json result{{"drafter_compressed", eviction.describe()},
                        {"draft_cache", draftCacheLayoutName(options.layout)},
                        {"gamma", options.gamma},
                        {"rounds", r.rounds},
                        {"generated", r.tokens.size()},
                        {"drafted", r.drafted},
                        {"accepted", r.accepted},
                        {"alpha", r.alpha},
                        {"draft_rows", r.draft_rows},
                        {"full_rows", r.full_rows},
                        {"draft_ms", r.draft_seconds * 1000},
                        {"verify_ms", r.verify_seconds * 1000},
                        {"session_ms", session_ms},
                        {"tokens_per_second", static_cast<double>(r.tokens.size()) / (session_ms / 1000)},
                        {"stopped_at_eos", r.stopped_at_eos},
                        {"ids", r.tokens},
                        {"text", text},
                        {"prompt_ids", prompt}};
  if (baseline) {
    result["baseline_ms"] = timed.baseline_ms;
    result["measured_speedup"] = timed.baseline_ms / session_ms;
    result["matches_target_greedy"] = timed.baseline.ids == r.tokens;
  }
  if (json) printJson(result);
  return 0;
}

}  // namespace kvscope::cli
