// kvscope-cli acceptance: greedy acceptance rate alpha of a drafter/target
// pair over a set of prompts, measured by a greedy speculative Session
// (core/train/greedy_acceptance.h). Used to check trained pairs.
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/error.h"
#include "core/model/model_bundle.h"
#include "core/train/greedy_acceptance.h"

namespace kvscope::cli {

namespace {

// Prompts are measured one after another, so the file's bound is its size, not a batch.
constexpr int64_t kMaxAcceptancePrompts = 100000;

int runAcceptance(Args& args) {
  const bool json = args.flag("json");
  const std::string target_dir = modelDirectory(args, "target", "target");
  const std::string drafter_dir = modelDirectory(args, "drafter", "drafter");
  const int64_t gamma = args.integer("gamma", 4);
  const int64_t max_new = args.integer("max-new", 48);
  std::vector<std::string> prompts;
  if (auto file = args.value("prompts")) {
    prompts = promptFileLines(*file, kMaxAcceptancePrompts, "measure a larger set in parts");
  }
  if (auto prompt = args.value("prompt")) prompts.push_back(*prompt);
  const WeightResidency weights = weightResidency(args);
  args.finish();
  if (prompts.empty()) throw Error("give --prompts FILE or --prompt TEXT");
  if (gamma <= 0 || max_new <= 0) throw Error("--gamma and --max-new must be positive");

  const ModelBundle target = loadModelBundle(target_dir, computeOptions(), weights);
  const ModelBundle drafter = loadModelBundle(drafter_dir, computeOptions(), weights);
  AcceptanceStats total;
  nlohmann::json per_prompt = nlohmann::json::array();
  for (const std::string& prompt : prompts) {
    const auto ids = target.tokenizer->encode(prompt);
    const AcceptanceStats s = greedyAcceptance(*target.model, *drafter.model, ids, gamma, max_new);
    const std::string continuation = target.tokenizer->decode(greedyContinuation(*target.model, ids, max_new));
    total.rounds += s.rounds;
    total.drafted += s.drafted;
    total.accepted += s.accepted;
    if (!json) std::cout << "alpha " << s.alpha() << "  " << prompt << " |" << continuation << "\n";
    per_prompt.push_back({{"prompt", prompt}, {"alpha", s.alpha()}, {"continuation", continuation}});
  }
  if (!json) std::cout << "alpha " << total.alpha() << " over " << prompts.size() << " prompts, gamma " << gamma << "\n";
  if (json) printJson({{"alpha", total.alpha()},
                       {"gamma", gamma},
                       {"rounds", total.rounds},
                       {"drafted", total.drafted},
                       {"accepted", total.accepted},
                       {"prompts", per_prompt}});
  return 0;
}

const CommandRegistrar kRegister{"acceptance",
    "acceptance [--target DIR] [--drafter DIR] (--prompts FILE | --prompt TEXT) [--gamma 4] [--max-new 48]\n"
    "           [--weights stored|fp32] [--json]",
    runAcceptance};

}  // namespace
}  // namespace kvscope::cli
