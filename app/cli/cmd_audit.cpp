// kvscope-cli audit: runs the session, then audits a recorded moment: every
// physical cache row against the rows the bookkeeping expects and a
// from-scratch recomputation of K and V. Without --at-round, the moment of
// the root cause (the first operation that broke the contract), else the end.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "app/cli/session_setup.h"
#include "core/audit/cache_audit.h"
#include "core/audit/row_history.h"
#include "core/error.h"
#include "core/trace/trace_json.h"

namespace kvscope::cli {
namespace {

void printAudit(const CacheAudit& a, const Tokenizer& tokenizer) {
  std::cout << cacheRoleName(a.cache) << " cache after round " << a.moment.round << " " << phaseName(a.moment.phase)
            << ": " << a.expected_rows << " rows expected, rows per layer:";
  for (int64_t n : a.rows_per_layer) std::cout << " " << n;
  std::cout << "; " << a.ok_rows << " rows ok, max value error " << a.max_value_error;
  if (a.clean()) {
    std::cout << " -> clean\n";
    return;
  }
  std::cout << "\n";
  for (const DanglingBlock& d : a.dangling_blocks) {
    std::cout << "  the block table maps pool block " << d.block << " for rows " << d.first_row << "-"
              << d.first_row + d.rows - 1 << ", which the sequence does not own ("
              << (d.owner < 0 ? std::string("on the free list") : "sequence " + std::to_string(d.owner) + "'s")
              << ")\n";
  }
  size_t shown = 0;
  for (const RowVerdict& v : a.rows) {
    if (++shown > 8) {
      std::cout << "  ... " << a.rows.size() - 8 << " more\n";
      break;
    }
    std::cout << "  layer " << v.layer << " row " << v.row << ": " << rowStateName(v.state) << ", '"
              << tokenizer.tokenText(v.token) << "' written for position " << v.position;
    if (v.rope_position != v.position) std::cout << " (rotary " << v.rope_position << ")";
    if (v.max_abs_dk) {
      std::cout << ", max |dK| " << *v.max_abs_dk << " |dV| " << *v.max_abs_dv << " (kv head " << v.worst_head << ")";
    }
    std::cout << "\n";
  }
}

Moment chosenMoment(Args& args, SessionController& controller) {
  const int64_t at_round = args.integer("at-round", -1);
  const auto phase = args.value("phase");
  const Moment last = controller.snapshot()->lastMoment();
  if (at_round >= 0) {
    const Phase p = phase ? parsePhase(*phase) : (at_round == 0 ? Phase::Prefill : Phase::Prune);
    return {at_round, p};
  }
  if (phase) throw Error("--phase needs --at-round");
  if (auto cause = controller.rootCause()) return {cause->round, cause->phase};
  return last;
}

// The history of the entry at one physical row of one layer at `moment`.
nlohmann::json printRowHistory(const SessionSnapshot& snapshot, CacheRole cache, int64_t layer, int64_t row,
                               const Moment& moment, bool json) {
  const std::vector<int64_t> rows = physicalRows(snapshot, cache, layer, moment);
  if (row < 0 || row >= static_cast<int64_t>(rows.size())) {
    throw Error("--row " + std::to_string(row) + ": the " + cacheRoleName(cache) + " cache's layer " +
                std::to_string(layer) + " holds " + std::to_string(rows.size()) + " rows after round " +
                std::to_string(moment.round) + " " + phaseName(moment.phase));
  }
  const int64_t entry = rows[static_cast<size_t>(row)];
  nlohmann::json items = nlohmann::json::array();
  if (!json) std::cout << "history of " << cacheRoleName(cache) << " layer " << layer << " row " << row << ":\n";
  const RoundStream stream = [&snapshot](int64_t round) {
    return streamOfRound(snapshot.sequence, snapshot.prompt_length, snapshot.rounds, round);
  };
  for (const RowHistoryItem& item : rowHistory(snapshot.entries, snapshot.events, entry, layer, stream)) {
    if (!json) {
      std::cout << "  round " << item.moment.round << " " << phaseName(item.moment.phase) << " ("
                << cacheEventKindName(item.operation) << "): " << item.what;
      if (!item.fault_action.empty()) std::cout << "  [fault: " << item.fault_action << "]";
      std::cout << "\n";
    }
    items.push_back(toJson(item));
  }
  return {{"cache", cacheRoleName(cache)}, {"layer", layer}, {"row", row}, {"entry", entry}, {"events", items}};
}

// Audits the shown sequence's caches at `moment`: {ok, ok_rows, rows, caches}.
nlohmann::json auditShown(SessionController& controller, const Moment& moment, const Tokenizer& tokenizer, bool json) {
  bool ok = true;
  int64_t ok_rows = 0;
  nlohmann::json rows = nlohmann::json::array(), caches = nlohmann::json::array();
  for (const CacheAudit& a : controller.auditAt(moment)) {
    if (!json) printAudit(a, tokenizer);
    ok = ok && a.clean();
    ok_rows += a.ok_rows;
    for (const RowVerdict& v : a.rows) rows.push_back(toJson(v));
    caches.push_back(toJson(a, true));
  }
  return {{"round", moment.round}, {"phase", phaseName(moment.phase)}, {"ok", ok},
          {"ok_rows", ok_rows},    {"rows", rows},                     {"caches", caches}};
}

// A batch: every sequence (or the one --sequence names) audited at its own
// root cause's moment, or the moment --at-round names, or its end.
int auditBatch(Args& args, const SessionSetup& setup, bool json, int64_t history_row, int64_t history_layer,
               CacheRole history_cache) {
  const int64_t only = args.integer("sequence", -1);
  auto controller = setup.makeController();
  controller->runToEnd();
  const int64_t count = controller->batchSize();
  if (only >= count) {
    throw Error("--sequence " + std::to_string(only) + ": the batch has " + std::to_string(count) +
                " sequences (0-" + std::to_string(count - 1) + ")");
  }
  if (history_row >= 0 && only < 0) throw Error("--row in a batch needs --sequence N (whose row)");
  bool ok = true;
  nlohmann::json sequences = nlohmann::json::array();
  for (int64_t i = 0; i < count; ++i) {
    if (only >= 0 && i != only) continue;
    controller->showSequence(i);
    const Moment moment = chosenMoment(args, *controller);
    if (!json) std::cout << "sequence " << i << ":\n";
    nlohmann::json result = auditShown(*controller, moment, *setup.target->tokenizer, json);
    result["sequence"] = i;
    if (history_row >= 0) {
      result["history"] = printRowHistory(*controller->snapshot(), history_cache, history_layer, history_row, moment, json);
    }
    ok = ok && result["ok"].get<bool>();
    sequences.push_back(result);
  }
  args.finish();
  if (!json && ok) std::cout << "every row of every audited cache is where the bookkeeping expects it, with the right values\n";
  if (json) printJson({{"fault", faultInfo(setup.options.fault).name}, {"ok", ok}, {"sequences", sequences}});
  return ok ? 0 : 1;
}

int runAudit(Args& args) {
  const bool json = args.flag("json");
  const int64_t history_row = args.integer("row", -1);
  const int64_t history_layer = args.integer("layer", 0);
  const CacheRole history_cache = parseCacheRole(args.value("cache-of-row").value_or("target"));
  SessionSetup setup = parseSessionSetup(args);
  if (!setup.options.use_cache) throw Error("audit checks the KV caches: use --cache on");
  if (setup.batched()) return auditBatch(args, setup, json, history_row, history_layer, history_cache);
  auto controller = setup.makeController();
  controller->runToEnd();
  const Moment moment = chosenMoment(args, *controller);
  args.finish();
  nlohmann::json result = auditShown(*controller, moment, *setup.target->tokenizer, json);
  const bool ok = result["ok"].get<bool>();
  if (!json && ok) std::cout << "every row of the audited caches is where the bookkeeping expects it, with the right values\n";
  result["fault"] = faultInfo(setup.options.fault).name;
  if (history_row >= 0) {
    result["history"] = printRowHistory(*controller->snapshot(), history_cache, history_layer, history_row, moment, json);
  }
  if (json) printJson(result);
  return ok ? 0 : 1;
}

// A fault's explanation cut to its first clause, for the one-line table: the
// explanations are written as "what goes wrong: how it shows", so what comes
// before the first ': ', '; ' or '. ' names the bug.
std::string firstClause(const std::string& text) {
  size_t end = text.size();
  for (const char* stop : {": ", "; ", ". "}) end = std::min(end, text.find(stop));
  std::string clause = text.substr(0, end);
  if (!clause.empty() && clause.back() == '.') clause.pop_back();
  return clause;
}

// What a fault needs besides a speculative run on one prompt: "-" for nothing.
std::string faultNeeds(Fault fault) {
  std::string needs;
  if (needsBatch(fault)) needs += "a batch";
  if (needsPagedCache(fault)) needs += std::string(needs.empty() ? "" : ", ") + "paged cache";
  if (needsPaddedBatch(fault)) needs += std::string(needs.empty() ? "" : ", ") + "padded layout";
  if (needsSlidingWindow(fault)) needs += std::string(needs.empty() ? "" : ", ") + "sliding window";
  return needs.empty() ? "-" : needs;
}

// The bug zoo as a table: name, what it needs, what it breaks in one line.
void printFaultTable(const std::vector<FaultInfo>& faults) {
  size_t name_width = 5, needs_width = 5;
  for (const FaultInfo& f : faults) {
    name_width = std::max(name_width, std::string(f.name).size());
    needs_width = std::max(needs_width, faultNeeds(f.fault).size());
  }
  std::cout << std::left << std::setw(static_cast<int>(name_width)) << "fault" << "  "
            << std::setw(static_cast<int>(needs_width)) << "needs" << "  what it breaks\n";
  for (const FaultInfo& f : faults) {
    std::cout << std::setw(static_cast<int>(name_width)) << f.name << "  " << std::setw(static_cast<int>(needs_width))
              << faultNeeds(f.fault) << "  " << firstClause(f.breaks) << "\n";
  }
  std::cout << std::right << "\n" << faults.size() << " faults; inject one with --fault NAME (run, diff, audit).\n"
            << "The full explanations and the real bugs they mirror: kvscope-cli faults --json\n";
}

int runFaults(Args& args) {
  const bool json = args.flag("json");
  args.finish();
  if (!json) {
    printFaultTable(allFaults());
    return 0;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const FaultInfo& f : allFaults()) {
    list.push_back({{"name", f.name}, {"explanation", f.breaks}, {"mirrors", f.real_world},
                    {"needs_batch", needsBatch(f.fault)}, {"needs_paged_cache", needsPagedCache(f.fault)},
                    {"needs_padded_batch", needsPaddedBatch(f.fault)},
                    {"needs_sliding_window", needsSlidingWindow(f.fault)}});
  }
  printJson({{"faults", list}});
  return 0;
}

const CommandRegistrar kRegisterAudit{
    "audit",
    "audit <run options> [--fault NAME] [--at-round R [--phase prefill|draft|verify|accept|prune]] "
    "[--row R [--layer L] [--cache-of-row target|drafter]] [--sequence N] [--json]   (exit 1 if a row is wrong; --row "
    "prints that row's history)\n"
    "           several prompts (a batch): every sequence audited at its own root cause (or --at-round, or its end),\n"
    "           reported under `sequences`; --sequence N audits one (and --row needs it)",
    runAudit};
const CommandRegistrar kRegisterFaults{
    "faults",
    "faults [--json]   (the bug zoo: a table of names and what each breaks; --json: the full explanations\n"
    "           and the real bug each mirrors)",
    runFaults};

}  // namespace
}  // namespace kvscope::cli
