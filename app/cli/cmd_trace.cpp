// kvscope-cli trace FILE [--json]: validates a .kvtrace (readTrace runs the
// trace validator) and summarises it without loading any model: what a user
// runs on a file someone sent them. The free-form info is read defensively:
// a missing or mistyped field shows as absent, never as an error.
#include <filesystem>
#include <iostream>
#include <optional>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/audit/batch_diff.h"
#include "core/audit/diff_report.h"
#include "core/audit/root_cause.h"
#include "core/error.h"
#include "core/model/tokenizer/visible_text.h"
#include "core/trace/trace_file.h"

namespace kvscope::cli {
namespace {

using nlohmann::json;

// info at the path, or nullptr when any step is missing.
const json* find(const json& j, std::initializer_list<const char*> path) {
  const json* node = &j;
  for (const char* key : path) {
    if (!node->is_object()) return nullptr;
    const auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

json stringAt(const json& j, std::initializer_list<const char*> path) {
  const json* node = find(j, path);
  return node && node->is_string() ? *node : json(nullptr);
}

json numberAt(const json& j, std::initializer_list<const char*> path) {
  const json* node = find(j, path);
  return node && node->is_number() ? *node : json(nullptr);
}

// The prompt as text: info.prompt when the GUI or CLI saved one, else the
// token texts of the prompt ids.
std::string promptText(const TraceData& trace) {
  const json prompt = stringAt(trace.info, {"prompt"});
  if (prompt.is_string() && !prompt.get<std::string>().empty()) return prompt.get<std::string>();
  std::string text;
  for (int64_t i = 0; i < trace.record.prompt_length; ++i) {
    const auto it = trace.token_text.find(trace.record.sequence[static_cast<size_t>(i)]);
    if (it == trace.token_text.end()) return "";  // no tokenizer was recorded
    text += it->second;
  }
  return text;
}

// The GUI saves target.name; kvscope-cli run saves target_dir.
json targetName(const json& info) {
  json name = stringAt(info, {"target", "name"});
  if (name.is_string()) return name;
  for (const json& dir : {stringAt(info, {"target", "dir"}), stringAt(info, {"target_dir"})}) {
    if (dir.is_string()) return std::filesystem::path(dir.get<std::string>()).filename().string();
  }
  return nullptr;
}

json models(const TraceData& trace) {
  const SessionRecord& r = trace.record;
  return {{"target", {{"name", targetName(trace.info)},
                      {"architecture", stringAt(trace.info, {"target", "architecture"})},
                      {"layers", r.target_layers}}},
          {"drafter", {{"description", stringAt(trace.info, {"drafter", "description"})},
                       {"layers", r.drafter_layers}}}};
}

json roundsSummary(const SessionRecord& r) {
  int64_t drafted = 0, accepted = 0;
  for (const RoundRecord& round : r.rounds) {
    if (round.index == 0) continue;
    drafted += static_cast<int64_t>(round.drafts.size());
    accepted += round.accepted;
  }
  const int64_t rounds = r.rounds.empty() ? 0 : static_cast<int64_t>(r.rounds.size()) - 1;
  return {{"rounds", rounds}, {"drafted", drafted}, {"accepted", accepted}};
}

// The diff the trace holds (info.investigation.diff), when it is one.
json investigation(const TraceData& trace) {
  const json* diff = find(trace.info, {"investigation", "diff"});
  json out = {{"has_diff", diff && diff->is_object()}, {"root_cause", nullptr}, {"explanation", nullptr}};
  if (!diff || !diff->is_object()) return out;
  const DiffReport report = diffReportFromJson(*diff);  // throws Error naming the problem
  out["explanation"] = report.explanation();
  out["diverged"] = report.diverged();
  if (report.root_cause) {
    const RootCause& c = *report.root_cause;
    out["root_cause"] = {{"cache", cacheRoleName(c.cache)}, {"round", c.round},
                         {"phase", phaseName(c.phase)},     {"operation", cacheEventKindName(c.operation)},
                         {"expected_rows", c.expected_rows}, {"actual_rows", c.actual_rows},
                         {"layers", c.layers},               {"what", c.what}};
  }
  return out;
}

// A batch trace: each sequence's figures and the first cache operation that
// broke its contract (the walker on its books, structure and stored values;
// no model is loaded), and which sequence broke first.
json batchSummary(const TraceData& trace) {
  json sequences = json::array();
  std::optional<RootCause> first;
  const auto text = [&trace](int64_t id) {
    const auto it = trace.token_text.find(id);
    return it == trace.token_text.end() ? std::string() : it->second;
  };
  for (int64_t i = 0; i < trace.sequences(); ++i) {
    const SessionRecord& r = trace.sequence(i);
    RootCauseOptions options;
    options.sequence = i;
    const std::optional<RootCause> cause = findRootCause(r, options, text);
    if (cause && (!first || happenedBefore(*cause, *first))) first = cause;
    sequences.push_back({{"sequence", i},
                         {"prompt_tokens", r.prompt_length},
                         {"generated_tokens", static_cast<int64_t>(r.sequence.size()) - r.prompt_length},
                         {"rounds", roundsSummary(r)},
                         {"root_cause", cause ? toJson(*cause) : json(nullptr)}});
  }
  return {{"sequences", sequences}, {"first_broken", first ? json(first->sequence) : json(nullptr)},
          {"root_cause", first ? toJson(*first) : json(nullptr)}};
}

json summarise(const std::string& path, const TraceData& trace) {
  const SessionRecord& r = trace.record;
  json investigated;
  try {
    investigated = investigation(trace);
  } catch (const std::exception& e) {  // Error, or nlohmann's for a mistyped field
    throw Error(path + ": corrupted trace: info.investigation.diff: " + e.what());
  }
  json summary = {{"file", path},
          {"valid", true},
          {"format_version", kTraceFormatVersion},
          {"batch", trace.sequences()},
          {"models", models(trace)},
          {"prompt", promptText(trace)},
          {"prompt_tokens", r.prompt_length},
          {"generated_tokens", static_cast<int64_t>(r.sequence.size()) - r.prompt_length},
          {"rounds", roundsSummary(r)},
          {"fault", r.fault},
          {"bookkeeping", bookkeepingName(r.bookkeeping)},
          {"use_cache", r.use_cache},
          {"gamma", numberAt(trace.info, {"options", "gamma"})},
          {"sampling", stringAt(trace.info, {"options", "sampling"})},
          {"ledger_entries", r.ledger.size()},
          {"cache_events", static_cast<int64_t>(r.events.events().size())},
          {"verify_records", static_cast<int64_t>(r.verify.size())},
          {"investigation", investigated}};
  if (trace.sequences() > 1) summary.update(batchSummary(trace));
  return summary;
}

// Text from the file, made safe for a terminal: a model name cannot colour,
// blink or move the cursor (visible_text.h).
std::string orUnknown(const json& value) {
  if (value.is_string()) return visibleText(value.get<std::string>());
  if (value.is_null()) return "?";
  return value.dump();
}

void printText(const json& s) {
  const json& m = s["models"];
  const json& inv = s["investigation"];
  std::cout << visibleText(s["file"].get<std::string>()) << ": a valid kvscope trace (format " << s["format_version"] << ")\n"
            << "  target:   " << orUnknown(m["target"]["name"]) << " (" << orUnknown(m["target"]["architecture"]) << ", "
            << m["target"]["layers"] << " layers)\n"
            << "  drafter:  " << orUnknown(m["drafter"]["description"]) << " (" << m["drafter"]["layers"] << " layers)\n"
            << "  prompt:   " << s["prompt"].dump(-1, ' ', false, json::error_handler_t::replace) << " ("
            << s["prompt_tokens"] << " tokens), " << s["generated_tokens"] << " generated\n"
            << "  rounds:   " << s["rounds"]["rounds"] << ", " << s["rounds"]["accepted"] << " of "
            << s["rounds"]["drafted"] << " drafts accepted; gamma " << orUnknown(s["gamma"]) << ", "
            << orUnknown(s["sampling"]) << "\n"
            << "  cache:    " << (s["use_cache"].get<bool>() ? "on" : "off") << ", " << s["bookkeeping"].get<std::string>()
            << " bookkeeping, fault " << visibleText(s["fault"].get<std::string>()) << "\n"
            << "  recorded: " << s["ledger_entries"] << " ledger entries, " << s["cache_events"] << " cache events, "
            << s["verify_records"] << " verify passes\n"
            << "  diff:     " << (inv["has_diff"].get<bool>() ? orUnknown(inv["explanation"]) : "none in the trace")
            << "\n";
  if (!inv["root_cause"].is_null()) std::cout << "  root cause: " << orUnknown(inv["root_cause"]["what"]) << "\n";
  if (!s.contains("sequences")) return;
  std::cout << "  batch:    " << s["batch"] << " sequences (the lines above are sequence 0's)\n";
  for (const json& q : s["sequences"]) {
    std::cout << "    sequence " << q["sequence"] << ": " << q["prompt_tokens"] << " prompt tokens, "
              << q["generated_tokens"] << " generated, " << q["rounds"]["accepted"] << " of " << q["rounds"]["drafted"]
              << " drafts accepted; "
              << (q["root_cause"].is_null() ? std::string("every cache operation kept the contract")
                                            : "contract broken at round " + q["root_cause"]["round"].dump())
              << "\n";
  }
  if (!s["root_cause"].is_null()) {
    std::cout << "  first breach: sequence " << s["first_broken"] << ": " << orUnknown(s["root_cause"]["what"]) << "\n";
  }
}

int runTrace(Args& args) {
  const bool as_json = args.flag("json");
  if (args.positional().size() != 1) throw Error("usage: kvscope-cli trace FILE [--json]");
  args.finish();
  const std::string path = args.positional()[0];
  const json summary = summarise(path, readTrace(path));
  if (as_json) {
    printJson(summary);
  } else {
    printText(summary);
  }
  return 0;
}

const CommandRegistrar kRegister{
    "trace",
    "trace FILE [--json]   (validates and summarises a .kvtrace; a batch's trace also names each sequence's first\n"
    "           broken cache operation and the sequence that broke first)",
    runTrace};

}  // namespace
}  // namespace kvscope::cli
