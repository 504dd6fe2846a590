// kvscope-cli diff: cached vs uncached, lockstep (teacher-forced) or
// free-running. Exit code 0 when nothing diverged, 1 when something did.
#include <iomanip>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/session_setup.h"
#include "core/error.h"
#include "core/trace/cache_diff.h"

namespace kvscope::cli {
namespace {

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
  if (!r.first_divergence) {
    std::cout << "no divergence\n";
    return;
  }
  const FirstDivergence& f = *r.first_divergence;
  std::cout << "FIRST DIVERGENCE: " << cacheRoleName(f.cache) << " cache, round " << f.round << ", position "
            << f.position;
  if (f.layer) std::cout << ", layer " << *f.layer << ", head " << *f.head;
  std::cout << "\n";
  if (r.audit_at_divergence && r.audit_at_divergence->first_bad) {
    const AuditReport& a = *r.audit_at_divergence;
    std::cout << "audit of the " << cacheRoleName(a.cache) << " cache at that moment: first bad cell layer "
              << a.first_bad->layer << ", head " << a.first_bad->head << ", position " << a.first_bad->position << " ("
              << a.first_bad->kind << "); cache rows per layer:";
    for (int64_t n : a.physical_lengths) std::cout << " " << n;
    std::cout << " for " << a.expected_length << " tokens\n";
  }
  for (const PositionDiff& d : r.positions) {
    if (d.verdict != PositionClass::Divergent) continue;
    std::cout << "  e.g. round " << d.round << " position " << d.position << ": max |delta| " << d.max_abs_logit_diff
              << ", KL " << d.kl << ", top-1 " << (d.top1_agree ? "agrees" : "flips") << " (margin " << d.top2_margin
              << ")\n";
    break;
  }
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

  DiffReport report;
  if (mode == "lockstep") {
    auto session = setup.makeSession(true);
    report = diffLockstep(*session, tolerances);
  } else {
    auto cached = setup.makeSession(true);
    auto uncached = setup.makeSession(false);
    report = diffFreeRunning(*cached, *uncached, tolerances);
  }
  if (!json) printReport(report, setup);
  auto result = toJson(report, json);
  result["fault"] = faultInfo(setup.options.fault).name;
  printJson(result);
  return report.diverged() ? 1 : 0;
}

const CommandRegistrar kRegister{
    "diff",
    "diff <run options> [--fault NAME] [--mode lockstep|free] [--noise-tolerance X] [--json]   (exit 1 if diverged)",
    runDiff};

}  // namespace
}  // namespace kvscope::cli
