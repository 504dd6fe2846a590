#include "core/check/capture_inspection.h"

#include <torch/types.h>

#include <algorithm>
#include <utility>

#include "core/capture/capture_shard.h"
#include "core/check/capture_models.h"
#include "core/check/capture_snapshot.h"
#include "core/check/capture_timeline.h"
#include "core/check/recurrent_state_rows.h"
#include "core/check/sequence_check.h"
#include "core/check/shard_check.h"
#include "core/error.h"
#include "core/snapshot/snapshot_builder.h"

namespace kvscope {

namespace {

// One role's reference: the loaded model when it is the captured checkpoint,
// else the directory the capture names when that one is; else none, and a
// note says why (the views still show the captured rows and their identity).
struct RoleReference {
  std::shared_ptr<const CausalLM> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string dir;
};

RoleReference referenceFor(const CaptureFile& file, CaptureRole role, const LoadedCaptureModel& loaded,
                           std::vector<std::string>& notes) {
  const CaptureModel& captured = *file.manifest().model(role);
  const std::string name = captureRoleName(role);
  std::string loaded_mismatch;
  if (loaded.model) {
    loaded_mismatch = captureModelMismatch(captured, *loaded.model);
    if (loaded_mismatch.empty()) return {loaded.model, loaded.tokenizer, loaded.dir};
  }
  if (const auto dir = namedModelDirectory(file, role)) {
    try {
      ModelBundle bundle = loadCaptureModel(*dir, captured, torch::TensorOptions().dtype(torch::kFloat32));
      return {std::move(bundle.model), std::move(bundle.tokenizer), *dir};
    } catch (const Error& error) {
      notes.push_back("the " + name + "'s K/V values and logits were not checked: " + error.what());
      return {};
    }
  }
  std::string why = "the capture ran '" + captured.name_or_path + "', which is not a model directory here";
  if (loaded.model) why += ", and the loaded " + name + " (" + loaded.dir + ") differs: " + loaded_mismatch;
  notes.push_back("the " + name + "'s K/V values and logits were not checked: " + why +
                  " (load that checkpoint, or check it with kvscope-cli check --" + name + " DIR)");
  return {};
}

// The views draw one sequence of a batch: the report they show is that
// sequence's, and a note says which one and which others broke.
CaptureCheckReport shownSequenceReport(const SequenceCheck& check, int64_t sequences) {
  if (sequences <= 1) return check.report;
  CaptureCheckReport report = check.shownReport();
  const bool first = check.report.root_cause && check.report.root_cause->sequence == check.shown_sequence;
  report.notes.insert(report.notes.begin(),
                      "a batch of " + std::to_string(sequences) + " sequences, each checked as its own run; shown: sequence " +
                          std::to_string(check.shown_sequence) + (first ? " (the first breach in the run)" : "") +
                          "; sequences with a breach or a divergence: " + check.brokenSequences());
  return report;
}

std::vector<InspectedSequence> inspectedSequences(const SequenceCheck& check) {
  std::vector<InspectedSequence> out;
  for (const SequenceVerdict& v : check.sequences) {
    const bool cause = check.report.root_cause && check.report.root_cause->sequence == v.sequence;
    out.push_back({cause, v.root_cause.has_value(), v.first_divergence.has_value()});
  }
  return out;
}

std::vector<InspectedRank> inspectedRanks(const ShardCheck& check,
                                          const std::vector<std::shared_ptr<const CaptureFile>>& files) {
  std::vector<InspectedRank> out;
  for (const RankVerdict& v : check.ranks) {
    out.push_back({check.root_cause_rank == v.rank, v.root_cause.has_value(),
                   describeShard(files[static_cast<size_t>(v.rank)]->manifest())});
  }
  return out;
}

// The check of one capture, or of every rank of a run, kept as the shown
// sequence's check (and, for ranks, a note naming the rank shown, and every
// rank's verdict for the picker).
SequenceCheck checkOpened(const std::vector<std::shared_ptr<const CaptureFile>>& files, const CaptureCheckOptions& options,
                          const TokenText& text, int64_t sequence, int64_t rank, std::vector<std::string>& notes,
                          CaptureInspection& out) {
  const CaptureFile& file = *files.front();
  if (files.size() == 1) {
    if (file.manifest().shard) notes.push_back(shardAloneNote(file.manifest()));
    return checkEverySequence(file, options, text, sequence);
  }
  ShardCheck ranks = checkEveryRank(files, options, text, rank);
  out.ranks = inspectedRanks(ranks, files);
  out.shown_rank = ranks.shown_rank;
  std::string note = "a tensor-parallel run of " + std::to_string(files.size()) +
                     " ranks, each checked on the KV heads it holds; shown: rank " + std::to_string(ranks.shown_rank) +
                     " (" + files[static_cast<size_t>(ranks.shown_rank)]->path() + "); ranks whose cache broke the contract: " +
                     ranks.brokenRanks();
  if (ranks.followingRanks() != "none") note += " (later breaches in rank(s) " + ranks.followingRanks() + " may follow from it)";
  if (ranks.root_cause_rank && *ranks.root_cause_rank != ranks.shown_rank)
    note += "; the run's root cause is in rank " + std::to_string(*ranks.root_cause_rank) + ", not shown";
  notes.push_back(note);
  if (sequence >= 0 && sequence != ranks.run.shown_sequence) {  // another sequence of the shown rank
    return checkEverySequence(*files[static_cast<size_t>(ranks.shown_rank)], options, text, sequence);
  }
  return std::move(ranks.run);
}

// A rank's caches hold some of the model's KV heads: the views number them as the model does.
void showShard(const CaptureFile& file, SessionSnapshot& snapshot) {
  const auto& shard = file.manifest().shard;
  if (!shard) return;
  snapshot.rank = shard->rank;
  snapshot.ranks = shard->ranks;
  for (const CaptureRole role : {CaptureRole::Target, CaptureRole::Drafter}) {
    CacheGeometry& g = role == CaptureRole::Target ? snapshot.target : snapshot.drafter;
    const auto r = static_cast<size_t>(role);
    if (!g.present || shard->kv_head_count[r] <= 0) continue;
    g.first_kv_head = shard->kv_head_first[r];
    const CaptureModel* model = file.manifest().model(role);
    g.model_kv_heads = model && model->config.num_key_value_heads ? *model->config.num_key_value_heads
                                                                 : g.first_kv_head + g.kv_heads;
  }
}

}  // namespace

CaptureInspection inspectCapture(const std::string& path, const std::array<LoadedCaptureModel, kCaptureRoles>& loaded,
                                 SnapshotBuilder& builder, int64_t sequence) {
  return inspectCaptures({path}, loaded, builder, sequence);
}

CaptureInspection inspectCaptures(const std::vector<std::string>& paths,
                                  const std::array<LoadedCaptureModel, kCaptureRoles>& loaded, SnapshotBuilder& builder,
                                  int64_t sequence, int64_t rank) {
  if (paths.empty()) throw Error("no capture to open");
  std::vector<std::shared_ptr<const CaptureFile>> files;
  for (const std::string& path : paths) files.push_back(CaptureFile::open(path));
  if (files.size() > 1) files = orderedRanks(std::move(files));
  const auto& file = files.front();
  CaptureInspection out;
  CaptureSnapshotSource source;
  source.path = file->path();
  source.engine = file->manifest().engine_name;
  CaptureCheckOptions options;
  RoleReference references[kCaptureRoles];
  for (int r = 0; r < kCaptureRoles; ++r) {
    const auto role = static_cast<CaptureRole>(r);
    if (!file->manifest().models[r]) continue;
    references[r] = referenceFor(*file, role, loaded[static_cast<size_t>(r)], source.notes);
    options.models[static_cast<size_t>(r)] = references[r].model.get();
    out.model_dirs[static_cast<size_t>(r)] = references[r].dir;
  }
  const CaptureModel& target = *file->manifest().model(CaptureRole::Target);
  source.target_name = target.name_or_path.empty() ? "target" : target.name_or_path;
  const CaptureModel* drafter = file->manifest().model(CaptureRole::Drafter);
  source.drafter_name = drafter ? (drafter->name_or_path.empty() ? "drafter" : drafter->name_or_path) : "none";
  const Tokenizer* tokenizer = references[0].tokenizer ? references[0].tokenizer.get() : references[1].tokenizer.get();
  if (tokenizer) source.vocab = vocabularyOf(*tokenizer);
  TokenText text;
  if (tokenizer) text = [tokenizer](int64_t id) { return tokenizer->tokenText(id); };

  source.target = references[0].model.get();
  if (sequence >= file->sequences())
    throw Error(file->path() + ": no sequence " + std::to_string(sequence) + " (the capture holds " +
                std::to_string(file->sequences()) + ")");
  std::vector<std::string> rank_notes;
  SequenceCheck check = checkOpened(files, options, text, sequence, rank, rank_notes, out);
  out.report = shownSequenceReport(check, file->sequences());
  out.report.notes.insert(out.report.notes.begin(), rank_notes.begin(), rank_notes.end());
  out.sequences = inspectedSequences(check);
  out.shown_sequence = check.shown_sequence;
  // The check's own "no model" notes say less than referenceFor's: keep those.
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (options.models[static_cast<size_t>(r)] || !file->manifest().models[r]) continue;
    const std::string generic = std::string("no ") + captureRoleName(static_cast<CaptureRole>(r)) + " model";
    auto& notes = out.report.notes;
    notes.erase(std::remove_if(notes.begin(), notes.end(), [&](const std::string& n) { return n.rfind(generic, 0) == 0; }),
                notes.end());
  }
  auto snapshot = captureSnapshot(*check.view, *check.timeline, std::move(*check.record), out.report, source,
                                  builder);  // no copy of the rows
  if (file->sequences() > 1) {
    for (const SequenceVerdict& v : check.sequences) snapshot->batch_accepted.push_back(v.accepted);
  }
  snapshot->shown_sequence = check.shown_sequence;
  showShard(*files[static_cast<size_t>(out.shown_rank)], *snapshot);
  snapshot->recurrent_states = recurrentStateRows(check.view->manifest(), out.report.root_cause);
  out.snapshot = std::move(snapshot);
  return out;
}

}  // namespace kvscope
