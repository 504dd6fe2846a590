// kvscope-cli check: reads a capture of another engine (docs/capture-format.md),
// replays it against kvscope's reference forward of the same checkpoints and
// names the first cache operation that broke the contract, and the first
// call whose logits differ. Exit 0 clean, 1 on a breach or a divergence, 2
// on an unusable file or models that do not match the capture.
#include <chrono>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/command_registry.h"
#include "core/capture/capture_file.h"
#include "core/check/capture_check.h"
#include "core/check/capture_models.h"
#include "core/check/capture_timeline.h"
#include "core/error.h"

namespace kvscope::cli {
namespace {

// --target / --drafter, else the directory the capture names (as given, or
// beside the capture file).
std::string roleDirectory(Args& args, const CaptureFile& file, CaptureRole role) {
  const std::string option = captureRoleName(role);
  if (auto dir = args.value(option)) return *dir;
  if (auto named = namedModelDirectory(file, role)) return *named;
  throw Error("the capture's " + option + " ran '" + file.manifest().model(role)->name_or_path +
              "', which is not a model directory here: pass --" + option + " DIR with that checkpoint");
}

nlohmann::json toJson(const CaptureDivergence& d) {
  return {{"role", captureRoleName(d.role)}, {"call", d.call}, {"input", d.input}, {"position", d.position},
          {"max_abs_delta", d.max_abs_delta}, {"kl", d.kl ? nlohmann::json(*d.kl) : nlohmann::json()},
          {"engine_top1", d.engine_top1}, {"reference_top1", d.reference_top1}, {"what", d.what}};
}

void printReport(const CaptureCheckReport& r, const CaptureFile& file, const std::vector<std::string>& dirs) {
  std::cout << "capture " << file.path() << ": target " << r.calls[0] << " calls (" << dirs[0] << ")";
  if (file.manifest().models[1]) std::cout << ", drafter " << r.calls[1] << " calls (" << dirs[1] << ")";
  std::cout << "\n";
  if (r.root_cause) std::cout << "root cause: " << r.root_cause->what << "\n";
  if (r.first_divergence) std::cout << "symptom: " << r.first_divergence->what << "\n";
  if (!r.root_cause && r.first_divergence) {
    std::cout << "every cache operation kept the contract: the difference is in what the engine computed, not in "
                 "what its cache held\n";
  }
  if (r.ok()) {
    std::cout << "every call kept the cache contract: " << r.rows_value_checked << " rows' K/V within "
              << r.max_value_error << " of the reference, " << r.logit_rows_checked << " logit rows match\n";
  }
  for (const std::string& note : r.notes) std::cout << "note: " << note << "\n";
}

int runCheck(Args& args) {
  const bool json = args.flag("json");
  if (args.positional().size() != 1) throw Error("check takes one capture file: check CAPTURE [--target DIR] [--drafter DIR]");
  const auto file = CaptureFile::open(args.positional().front());
  requireOneSequence(*file);  // before loading models: the refusal is the news
  std::vector<ModelBundle> bundles;
  std::vector<std::string> dirs;
  CaptureCheckOptions options;
  const WeightResidency weights = weightResidency(args);
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto role = static_cast<CaptureRole>(r);
    if (!file->manifest().models[r]) {
      if (args.value(captureRoleName(role))) throw Error("the capture has no " + std::string(captureRoleName(role)));
      continue;
    }
    dirs.push_back(roleDirectory(args, *file, role));
    bundles.push_back(loadCaptureModel(dirs.back(), *file->manifest().models[r], computeOptions(), weights));
    options.models[r] = bundles.back().model.get();
  }
  args.finish();
  const auto started = std::chrono::steady_clock::now();
  const CaptureTimeline timeline = buildCaptureTimeline(*file);
  const CaptureRecordView view = captureRecordView(timeline);
  const Tokenizer& tokenizer = *bundles.front().tokenizer;
  const TokenText text = [&tokenizer](int64_t id) { return tokenizer.tokenText(id); };
  const CaptureCheckReport report = checkCapture(*file, timeline, view, options, text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!json) printReport(report, *file, dirs);
  // Format 2: root_cause is the one form `diff` and traces use too
  // (docs/engine-captures.md); format 1's operation (forward / between) is its step.
  if (json) printJson({{"format", 2},
                       {"ok", report.ok()},
                       {"calls", {{"target", report.calls[0]}, {"drafter", report.calls[1]}}},
                       {"root_cause", report.root_cause ? toJson(*report.root_cause) : nlohmann::json()},
                       {"first_divergence", report.first_divergence ? toJson(*report.first_divergence) : nlohmann::json()},
                       {"committed", report.committed_inferred ? "inferred" : "recorded"},
                       {"rows_value_checked", report.rows_value_checked},
                       {"max_value_error", report.max_value_error},
                       {"logit_rows_checked", report.logit_rows_checked},
                       {"notes", report.notes},
                       {"seconds", seconds}});
  return report.ok() ? 0 : 1;
}

const CommandRegistrar kRegisterCheck{
    "check",
    "check CAPTURE [--target DIR] [--drafter DIR] [--weights stored|fp32] [--json]   (another engine's capture against kvscope's reference "
    "forward: the root cause of a cache bug; exit 1 on a breach, 2 on an unusable file or models that do not match)",
    runCheck};

}  // namespace
}  // namespace kvscope::cli
