// kvscope-cli audit: recompute K/V from scratch and compare with the caches.
// Without --at-round, audits after every round and stops at the first bad one.
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/session_setup.h"
#include "core/error.h"
#include "core/trace/cache_audit.h"

namespace kvscope::cli {
namespace {

std::vector<AuditReport> auditNow(const Session& session) {
  std::vector<AuditReport> reports;
  const int64_t round = session.currentRound() - 1;  // the round just pruned
  if (session.targetCache()) {
    reports.push_back(auditCache(session.target(), *session.targetCache(),
                                 session.believedCacheTokens(CacheRole::Target), CacheRole::Target, round));
  }
  if (session.drafterCache()) {
    reports.push_back(auditCache(*session.drafter()->model(), *session.drafterCache(),
                                 session.believedCacheTokens(CacheRole::Drafter), CacheRole::Drafter, round));
  }
  return reports;
}

void printAudit(const AuditReport& a) {
  std::cout << cacheRoleName(a.cache) << " cache after round " << a.round << ": " << a.expected_length
            << " tokens expected, rows per layer:";
  for (int64_t n : a.physical_lengths) std::cout << " " << n;
  std::cout << "; max value error " << a.max_value_error;
  if (a.clean()) {
    std::cout << " -> clean\n";
  } else {
    const AuditCell& c = *a.first_bad;
    std::cout << "\n  FIRST BAD CELL: round " << c.round << ", layer " << c.layer << ", head " << c.head
              << ", position " << c.position << " (" << c.kind << "), " << a.bad_cells << " bad cells in all\n";
  }
}

int runAudit(Args& args) {
  const bool json = args.flag("json");
  const int64_t at_round = args.integer("at-round", -1);
  SessionSetup setup = parseSessionSetup(args);
  args.finish();
  if (!setup.options.use_cache) throw Error("audit checks the KV caches: use --cache on");
  auto session = setup.makeSession(true);
  session->stepPhase();  // prefill
  std::vector<AuditReport> reports;
  bool bad = false;
  while (!session->finished()) {
    session->stepRound();
    const int64_t round = session->currentRound() - 1;
    if (at_round >= 0 && round < at_round) continue;
    reports = auditNow(*session);
    for (const auto& r : reports) bad = bad || !r.clean();
    if (bad || at_round >= 0) break;
  }
  if (reports.empty()) reports = auditNow(*session);
  nlohmann::json caches = nlohmann::json::array();
  for (const auto& r : reports) {
    if (!json) printAudit(r);
    caches.push_back(toJson(r, true));
  }
  if (!json && !bad) std::cout << "all audited caches match a fresh recomputation\n";
  printJson({{"fault", faultInfo(setup.options.fault).name}, {"clean", !bad}, {"caches", caches}});
  return bad ? 1 : 0;
}

int runFaults(Args& args) {
  const bool json = args.flag("json");
  args.finish();
  nlohmann::json list = nlohmann::json::array();
  for (const FaultInfo& f : allFaults()) {
    if (!json) std::cout << f.name << "\n  what it breaks: " << f.breaks << "\n  mirrors: " << f.real_world << "\n\n";
    list.push_back({{"name", f.name}, {"breaks", f.breaks}, {"mirrors", f.real_world}});
  }
  printJson({{"faults", list}});
  return 0;
}

const CommandRegistrar kRegisterAudit{
    "audit", "audit <run options> [--fault NAME] [--at-round R] [--json]   (exit 1 if a cache is wrong)", runAudit};
const CommandRegistrar kRegisterFaults{"faults", "faults [--json]   (the bug zoo, with explanations)", runFaults};

}  // namespace
}  // namespace kvscope::cli
