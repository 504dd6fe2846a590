// kvscope-cli check: reads a capture of another engine (docs/capture-format.md),
// replays it against kvscope's reference forward of the same checkpoints and
// names the first cache operation that broke the contract, and the first
// call whose logits differ. Exit 0 clean, 1 on a breach or a divergence, 2
// on an unusable file or models that do not match the capture. A capture of
// a model kvscope cannot load is checked on its bookkeeping alone.
#include <chrono>
#include <iostream>
#include <sstream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/capture/capture_file.h"
#include "core/check/capture_check.h"
#include "core/check/capture_models.h"
#include "core/check/paged_explanation.h"
#include "core/check/sequence_check.h"
#include "core/check/shard_check.h"
#include "core/capture/capture_shard.h"
#include "core/error.h"
#include "core/error_text.h"
#include "core/model/model_config.h"

namespace kvscope::cli {
namespace {

// The reference checkpoint of `role`: --target / --drafter DIR (it must load
// and match the capture, else exit 2); else the directory the capture names,
// as given or beside the capture file, when it is one here and of a family
// kvscope implements. Else none (nullopt, `why` says why): the bookkeeping is
// checked without values or logits; with --require-model that is exit 2.
std::optional<std::string> referenceDirectory(Args& args, const CaptureFile& file, CaptureRole role, bool require,
                                              std::string& why) {
  const std::string option = captureRoleName(role);
  if (auto dir = args.value(option)) return *dir;
  const CaptureModel& captured = *file.manifest().model(role);
  const auto& type = captured.config.model_type;
  if (type && !implementedModelType(*type)) {
    why = "its model type '" + *type + "' is no family kvscope implements";
  } else if (auto named = namedModelDirectory(file, role)) {
    return *named;
  } else {
    why = "the capture ran '" + captured.name_or_path + "', which is not a model directory here";
  }
  if (require) throw Error("the capture's " + option + ": " + why + ": pass --" + option + " DIR with that checkpoint");
  return std::nullopt;
}

nlohmann::json toJson(const CaptureDivergence& d) {
  return {{"role", captureRoleName(d.role)}, {"call", d.call}, {"sequence", d.sequence}, {"input", d.input}, {"position", d.position},
          {"max_abs_delta", d.max_abs_delta}, {"kl", d.kl ? nlohmann::json(*d.kl) : nlohmann::json()},
          {"engine_top1", d.engine_top1}, {"reference_top1", d.reference_top1}, {"what", d.what}};
}

// Per sequence of a batch: its own verdict, so a user sees which rows broke.
nlohmann::json sequencesJson(const std::vector<SequenceVerdict>& sequences) {
  nlohmann::json out = nlohmann::json::array();
  for (const SequenceVerdict& v : sequences) {
    out.push_back({{"sequence", v.sequence},
                   {"ok", v.ok()},
                   {"root_cause", v.root_cause ? nlohmann::json(v.root_cause->what) : nlohmann::json()},
                   {"first_divergence", v.first_divergence ? nlohmann::json(v.first_divergence->what) : nlohmann::json()}});
  }
  return out;
}

// Per rank of a tensor-parallel run: its own verdict.
nlohmann::json ranksJson(const std::vector<RankVerdict>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankVerdict& v : ranks) {
    out.push_back({{"rank", v.rank},
                   {"ok", v.ok()},
                   {"root_cause", v.root_cause ? nlohmann::json(v.root_cause->what) : nlohmann::json()},
                   {"follows_root_cause", v.follows_root_cause}});
  }
  return out;
}

// What was checked: one capture (a batch of sequences, maybe one rank's
// part of a run) or every rank of a tensor-parallel run.
struct CheckedRun {
  SequenceCheck check;
  std::optional<ShardCheck> ranks;  // set when every rank's file was given
};

void writeHeader(std::ostream& out, const CheckedRun& checked, const CaptureFile& file, const std::vector<std::string>& dirs) {
  const CaptureCheckReport& r = checked.check.report;
  out << "capture " << file.path();
  if (checked.ranks) out << " and " << checked.ranks->ranks.size() - 1 << " more rank(s)";
  out << ": target " << r.calls[0] << " calls (" << dirs[0] << ")";
  if (file.manifest().models[1]) out << ", drafter " << r.calls[1] << " calls (" << dirs[1] << ")";
  out << "\n";
  if (checked.ranks) {
    out << "a tensor-parallel run of " << checked.ranks->ranks.size() << " ranks, each checked on the KV heads it "
        << "holds; ranks whose cache broke the contract: " << checked.ranks->brokenRanks();
    if (checked.ranks->followingRanks() != "none") {
      out << " (later breaches in rank(s) " << checked.ranks->followingRanks()
          << " may follow from it: the ranks sum their activations)";
    }
    out << "\n";
  } else if (file.manifest().shard) {
    out << describeShard(file.manifest()) << ", checked alone on the KV heads it holds\n";
  }
  if (file.sequences() > 1) {
    out << "a batch of " << file.sequences() << " sequences, each checked as its own run; sequences with a breach "
        << "or a divergence" << (checked.ranks ? " (rank " + std::to_string(checked.ranks->shown_rank) + ")" : "")
        << ": " << checked.check.brokenSequences() << "\n";
  }
}

void writeReport(std::ostream& out, const CheckedRun& checked, const CaptureFile& file, const std::vector<std::string>& dirs) {
  writeHeader(out, checked, file, dirs);
  const CaptureCheckReport& r = checked.check.report;
  if (r.root_cause) out << "root cause: " << r.root_cause->what << "\n";
  if (r.first_divergence) out << "symptom: " << r.first_divergence->what << "\n";
  if (!r.root_cause && r.first_divergence) {
    out << "every cache operation kept the contract: the difference is in what the engine computed, not in "
           "what its cache held\n";
  }
  if (r.ok()) {
    out << "every call kept the cache contract: ";
    if (r.rows_value_checked > 0) {
      out << r.rows_value_checked << " rows' K/V within " << r.max_value_error << " of the reference, ";
    } else {
      out << "the bookkeeping holds (no row's K/V compared), ";
    }
    out << r.logit_rows_checked << " logit rows match\n";
  }
  for (const std::string& note : r.notes) out << "note: " << note << "\n";
}

// The report quotes the capture (paths, names, tokens): shown escaped, as errors are.
void printReport(const CheckedRun& checked, const CaptureFile& file, const std::vector<std::string>& dirs) {
  std::ostringstream text;
  writeReport(text, checked, file, dirs);
  std::cout << displayableError(text.str(), std::string::npos);
}

// Every file named: one capture, or every rank's capture of one run (in rank order).
std::vector<std::shared_ptr<const CaptureFile>> openCaptures(const std::vector<std::string>& paths) {
  if (paths.empty())
    throw Error("check takes a capture file, or every rank's capture of one tensor-parallel run: check CAPTURE... "
                "[--target DIR] [--drafter DIR]");
  std::vector<std::shared_ptr<const CaptureFile>> files;
  for (const std::string& path : paths) files.push_back(CaptureFile::open(path));
  return files.size() == 1 ? files : orderedRanks(std::move(files));
}

// The rank that broke, beside the one JSON form of a root cause.
// A paged engine's block facts join the row_details (core/check/paged_explanation.h).
nlohmann::json rootCauseJson(const std::optional<RootCause>& cause, const CheckedRun& checked, const CaptureFile& file) {
  if (!cause) return nlohmann::json();
  nlohmann::json out = toJson(*cause);
  if (checked.ranks) {
    out["rank"] = checked.ranks->root_cause_rank.value_or(0);
  } else if (const auto paged = explainPagedRows(file.manifest(), *cause)) {
    addPagedFacts(out, *paged);
  }
  return out;
}

int runCheck(Args& args) {
  const bool json = args.flag("json");
  const auto files = openCaptures(args.positional());
  const CaptureFile& file = *files.front();
  std::vector<ModelBundle> bundles;
  std::vector<std::string> dirs;
  CaptureCheckOptions options;
  const WeightResidency weights = weightResidency(args);
  const bool require_model = args.flag("require-model");
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto role = static_cast<CaptureRole>(r);
    if (!file.manifest().models[r]) {
      if (args.value(captureRoleName(role))) throw Error("the capture has no " + std::string(captureRoleName(role)));
      continue;
    }
    std::string why;
    const auto dir = referenceDirectory(args, file, role, require_model, why);
    if (!dir) {
      dirs.push_back("no reference model: bookkeeping only");
      options.no_model_reason[static_cast<size_t>(r)] = why;
      continue;
    }
    dirs.push_back(*dir);
    bundles.push_back(loadCaptureModel(*dir, *file.manifest().models[r], computeOptions(), weights));
    options.models[r] = bundles.back().model.get();
  }
  args.finish();
  const auto started = std::chrono::steady_clock::now();
  const Tokenizer* tokenizer = bundles.empty() ? nullptr : bundles.front().tokenizer.get();
  TokenText text;
  if (tokenizer) text = [tokenizer](int64_t id) { return tokenizer->tokenText(id); };
  CheckedRun checked;
  if (files.size() > 1) {
    checked.ranks = checkEveryRank(files, options, text);
    checked.check = std::move(checked.ranks->run);  // the ranks' list and names stay in `ranks`
  } else {
    checked.check = checkEverySequence(file, options, text);
    if (file.manifest().shard) checked.check.report.notes.push_back(shardAloneNote(file.manifest()));
  }
  const CaptureCheckReport& report = checked.check.report;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!json) printReport(checked, file, dirs);
  // Format 2: root_cause is the one form `diff` and traces use too
  // (docs/engine-captures.md); format 1's operation (forward / between) is its step.
  if (json) {
    nlohmann::json out = {
        {"format", 2},
        {"ok", report.ok()},
        {"calls", {{"target", report.calls[0]}, {"drafter", report.calls[1]}}},
        {"root_cause", rootCauseJson(report.root_cause, checked, file)},
        {"first_divergence", report.first_divergence ? toJson(*report.first_divergence) : nlohmann::json()},
        {"batch", file.sequences()},
        {"sequences", sequencesJson(checked.check.sequences)},
        {"committed", report.committed_inferred ? "inferred" : "recorded"},
        {"rows_value_checked", report.rows_value_checked},
        {"max_value_error", report.max_value_error},
        {"logit_rows_checked", report.logit_rows_checked},
        {"notes", report.notes},
        {"seconds", seconds}};
    if (checked.ranks) out["ranks"] = ranksJson(checked.ranks->ranks);
    if (file.manifest().shard) out["shard"] = describeShard(file.manifest());
    printJson(out);
  }
  return report.ok() ? 0 : 1;
}

const CommandRegistrar kRegisterCheck{
    "check",
    "check CAPTURE... [--target DIR] [--drafter DIR] [--require-model] [--weights stored|fp32] [--json]   (another "
    "engine's capture against kvscope's reference forward: the root cause of a cache bug; exit 1 on a breach, 2 on an "
    "unusable file or models that do not match. Several files: every rank's capture of one tensor-parallel run, "
    "checked as one run. Without a model kvscope implements, the bookkeeping alone is checked and a note "
    "says so; --require-model makes that exit 2)",
    runCheck};

}  // namespace
}  // namespace kvscope::cli
