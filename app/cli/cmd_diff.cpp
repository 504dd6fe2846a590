// kvscope-cli diff: cached vs uncached, lockstep (teacher-forced) or
// free-running, and the root cause: the first cache operation that broke the
// bookkeeping's contract. Exit code 0 when nothing diverged and every
// operation kept the contract, 1 otherwise.
#include <iomanip>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/session_setup.h"
#include "core/audit/batch_diff.h"
#include "core/audit/cache_diff.h"
#include "core/error.h"

namespace kvscope::cli {
namespace {

void printRootCause(const RootCause& c) {
  std::cout << "ROOT CAUSE: " << c.what << "\n";
  std::cout << "  " << cacheRoleName(c.cache) << " cache, round " << c.round << ", " << phaseName(c.phase) << ", "
            << cacheEventKindName(c.operation) << ": " << c.actual_rows << " rows, " << c.expected_rows
            << " required; layers";
  for (int64_t l : c.layers) std::cout << " " << l;
  std::cout << "; rows";
  for (size_t i = 0; i < c.rows.size() && i < 12; ++i) std::cout << " " << c.rows[i];
  if (c.rows.size() > 12) std::cout << " ...";
  std::cout << "\n";
}

void printReport(const DiffReport& r, const SessionSetup& setup) {
  std::cout << std::setprecision(4);
  std::cout << "diff (" << r.mode << "), fault: " << faultInfo(setup.options.fault).name << "\n";
  std::cout << "positions compared: " << r.positions.size() << "  agree " << r.agree << ", numerical noise " << r.noise
            << ", divergent " << r.divergent << "; max |delta logit| " << r.max_abs_logit_diff << "\n";
  std::cout << "top-1 flips: " << r.top1_flips << "; smallest top-2 margin " << r.min_top2_margin
            << " (a flip counts as noise only when the margin is <= 2 x |delta|)\n";
  if (r.mode == "free") {
    if (r.first_token_divergence >= 0) {
      std::cout << "first token divergence at generated token " << r.first_token_divergence << "\n";
    } else {
      std::cout << "cached and uncached runs produced the same " << r.cached_tokens.size() << " tokens\n";
    }
  }
  std::cout << r.explanation() << "\n";
  if (r.root_cause) printRootCause(*r.root_cause);
  if (r.eviction_cause && !r.root_cause) {
    const EvictionCause& e = *r.eviction_cause;
    std::cout << "INTENDED EVICTION (not a cache bug): policy " << e.policy << ", round " << e.round << " ("
              << phaseName(e.phase) << "), " << e.masked << " (layer, kv head) rows masked in " << e.evictions
              << " evictions so far\n";
  }
  if (r.first_divergence) {
    const FirstDivergence& f = *r.first_divergence;
    std::cout << "FIRST DIVERGENCE: " << cacheRoleName(f.cache) << " cache, round " << f.round << " ("
              << phaseName(f.phase) << "), position " << f.position;
    if (f.layer) std::cout << "; first bad row at that moment: layer " << *f.layer << ", head " << *f.head << ", row " << *f.row;
    std::cout << "\n";
  }
  for (const PositionDiff& d : r.positions) {
    if (d.verdict != PositionClass::Divergent) continue;
    std::cout << "  e.g. round " << d.round << " position " << d.position << ": max |delta| " << d.max_abs_logit_diff
              << ", KL " << d.kl << ", top-1 " << (d.top1_agree ? "agrees" : "flips") << " (margin " << d.top2_margin
              << ")\n";
    break;
  }
}

// A batch: every sequence diffed in lockstep; the root cause that happened
// first names its sequence.
int runBatchDiff(const SessionSetup& setup, const DiffTolerances& tolerances, bool json) {
  auto batch = setup.makeBatchSession(true);
  const BatchDiffReport report = diffBatchLockstep(*batch, tolerances);
  if (!json) {
    std::cout << "diff (lockstep) of a batch of " << report.sequences.size()
              << " sequences, fault: " << faultInfo(setup.options.fault).name << "\n";
    for (size_t i = 0; i < report.sequences.size(); ++i) {
      const DiffReport& r = report.sequences[i];
      std::cout << "  sequence " << i << ": " << r.positions.size() << " positions, divergent " << r.divergent
                << (r.root_cause ? ", contract broken at round " + std::to_string(r.root_cause->round) : std::string())
                << "\n";
    }
    std::cout << report.explanation() << "\n";
    if (const RootCause* cause = report.rootCause()) {
      std::cout << "(sequence " << cause->sequence << ") ";
      printRootCause(*cause);
    }
  }
  nlohmann::json result;
  result["mode"] = "lockstep";
  result["batch"] = report.sequences.size();
  result["fault"] = faultInfo(setup.options.fault).name;
  result["failed"] = report.failed();
  result["explanation"] = report.explanation();
  result["sequences"] = nlohmann::json::array();
  for (size_t i = 0; i < report.sequences.size(); ++i) {
    nlohmann::json one = toJson(report.sequences[i], json);
    one["sequence"] = i;
    result["sequences"].push_back(one);
  }
  result["root_cause"] = report.rootCause() ? toJson(*report.rootCause()) : nlohmann::json();
  if (json) printJson(result);
  return report.failed() ? 1 : 0;
}

int runDiff(Args& args) {
  const bool json = args.flag("json");
  const std::string mode = args.value("mode").value_or("lockstep");
  if (mode != "lockstep" && mode != "free") throw Error("--mode must be lockstep or free, got '" + mode + "'");
  DiffTolerances tolerances;
  tolerances.noise = args.number("noise-tolerance", tolerances.noise);
  SessionSetup setup = parseSessionSetup(args);
  args.finish();
  if (!setup.options.use_cache) throw Error("diff compares the cached run against an uncached one: use --cache on");
  if (setup.batched()) {
    if (mode != "lockstep") throw Error("--mode free compares one sequence; a batch is diffed in lockstep");
    return runBatchDiff(setup, tolerances, json);
  }

  DiffReport report;
  if (mode == "lockstep") {
    if (tolerances.noise != DiffTolerances{}.noise) {
      auto session = setup.makeSession(true);
      report = diffLockstep(*session, tolerances);
    } else {
      auto controller = setup.makeController();  // the GUI's code path
      report = controller->runDiff();
    }
  } else {
    auto cached = setup.makeSession(true);
    auto uncached = setup.makeSession(false);
    report = diffFreeRunning(*cached, *uncached, tolerances);
  }
  if (!json) {
    printReport(report, setup);
    return report.failed() ? 1 : 0;
  }
  auto result = toJson(report, true);
  result["fault"] = faultInfo(setup.options.fault).name;
  printJson(result);
  return report.failed() ? 1 : 0;
}

const CommandRegistrar kRegister{
    "diff",
    "diff <run options> [--fault NAME] [--mode lockstep|free] [--noise-tolerance X] [--json]   (exit 1 if diverged "
    "(unless after an --evict policy's eviction) or a cache operation broke the contract)\n"
    "           several prompts (a batch): every sequence diffed in lockstep; the root cause names its sequence\n"
    "           (root_cause.sequence), the first breach in time across the batch",
    runDiff};

}  // namespace
}  // namespace kvscope::cli
