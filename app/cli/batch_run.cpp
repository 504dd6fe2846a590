#include "app/cli/batch_run.h"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/token_printer.h"
#include "core/cache/fault.h"
#include "core/check/batch_capture_writer.h"
#include "core/error.h"
#include "core/control/trace_capture.h"
#include "core/trace/trace_json.h"

namespace kvscope::cli {
namespace {

// Streams the rounds every sequence finished since the last call, round by
// round, each line naming its sequence.
class RoundStream {
 public:
  explicit RoundStream(size_t sequences) : printed_(sequences, 0) {}
  void printNew(const BatchSession& batch) {
    bool more = true;
    while (more) {
      more = false;
      for (size_t i = 0; i < batch.size(); ++i) {
        const auto& rounds = batch.sequence(i).rounds();
        if (printed_[i] >= rounds.size()) continue;
        const RoundRecord& round = rounds[printed_[i]];
        if (round.index > 0 && !round.prune_done) continue;  // still running (the prefill, round 0, is not printed)
        if (round.index > 0) {
          nlohmann::json line = toJson(round);
          line["sequence"] = i;
          std::cout << line.dump() << "\n";
        }
        ++printed_[i];
        more = true;
      }
    }
  }

 private:
  std::vector<size_t> printed_;
};

nlohmann::json sequenceJson(const SessionSetup& setup, const BatchSession& batch, size_t i) {
  const Session& s = batch.sequence(i);
  nlohmann::json out = toJson(s.metrics());
  out["sequence"] = i;
  out["prompt_ids"] = setup.prompts[i];
  out["ids"] = s.generated();
  out["text"] = setup.target->tokenizer->decode(s.generated());
  std::vector<int64_t> accepted;  // per round after the prefill
  for (const RoundRecord& r : s.rounds()) {
    if (r.index > 0) accepted.push_back(r.accepted);
  }
  out["accepted_per_round"] = accepted;
  return out;
}

}  // namespace

int runBatch(const SessionSetup& setup, const BatchRunOutput& output) {
  require(!(output.capture_path && setup.options.batch_layout == BatchLayout::Padded),
          "--capture with --batch-layout padded: a padded batch's capture is not written yet (its pad rows would read "
          "as rows of the sequence); capture the ragged batch");
  auto batch = setup.makeBatchSession(setup.options.use_cache);
  RoundStream stream(batch->size());
  const auto start = std::chrono::steady_clock::now();
  while (!batch->finished()) {
    batch->stepRound();
    if (output.json) stream.printNew(*batch);
  }
  const double session_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int64_t generated = 0;
  for (size_t i = 0; i < batch->size(); ++i) generated += static_cast<int64_t>(batch->sequence(i).generated().size());
  const double tokens_per_second = session_ms > 0 ? 1000.0 * static_cast<double>(generated) / session_ms : 0;

  if (!output.json) {
    const bool colour = isatty(STDOUT_FILENO) != 0;
    for (size_t i = 0; i < batch->size(); ++i) {
      std::cout << "=== sequence " << i << " (prompt of " << setup.prompts[i].size() << " tokens) ===\n";
      printColouredRounds(std::cout, batch->sequence(i), *setup.target->tokenizer, colour);
      printMetrics(std::cout, batch->sequence(i).metrics());
    }
    std::cout << "batch of " << batch->size() << ": " << generated << " tokens in " << session_ms << " ms ("
              << tokens_per_second << " tokens/s); " << batch->batchedForwards() << " batched forwards carried "
              << batch->sequencesForwarded() << " sequence forwards\n";
    if (output.baseline) {
      std::cout << "measured speedup: not measured for a batch (run one prompt for the speedup over plain decoding)\n";
    }
  }
  if (output.trace_path) {
    writeTrace(*output.trace_path,
               captureTrace(*batch, setup.target->tokenizer.get(),
                            nlohmann::json::object({{"target_dir", setup.target->dir}, {"drafter_dir", setup.drafter_label}})));
  }
  if (output.capture_path) {
    std::vector<const SessionRecord*> records;
    for (size_t i = 0; i < batch->size(); ++i) records.push_back(&batch->sequence(i).record());
    writeBatchCapture(*output.capture_path, records, {setup.target->dir, setup.target->model.get()},
                      {setup.drafter ? setup.drafter->dir : "", setup.drafter ? setup.drafter->model.get() : nullptr},
                      std::string("kvscope-cli run (fault ") + faultInfo(setup.options.fault).name + ")",
                      poolPicturesOf(*batch));
    if (!output.json) {
      std::cout << "capture written to " << *output.capture_path << " (check it: kvscope-cli check "
                << *output.capture_path << ")\n";
    }
  }
  nlohmann::json result;
  result["batch"] = batch->size();
  result["sequences"] = nlohmann::json::array();
  for (size_t i = 0; i < batch->size(); ++i) result["sequences"].push_back(sequenceJson(setup, *batch, i));
  result["generated"] = generated;
  result["session_ms"] = session_ms;
  result["tokens_per_second"] = tokens_per_second;
  result["batched_forwards"] = batch->batchedForwards();
  result["sequence_forwards"] = batch->sequencesForwarded();
  if (output.json) printJson(result);
  return 0;
}

}  // namespace kvscope::cli
