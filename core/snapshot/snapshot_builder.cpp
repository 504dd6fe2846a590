#include "core/snapshot/snapshot_builder.h"

#include <torch/types.h>

#include <sstream>

#include <spdlog/spdlog.h>

#include "core/audit/investigation_fit.h"
#include "core/error.h"
#include "core/decode/session.h"
#include "core/model/tokenizer/tokenizer.h"
#include "core/trace/trace_file.h"
#include "core/trace/trace_json.h"

namespace kvscope {

namespace {

// The options line's words for a confidence stop (SessionOptions::draft_confidence), none when off.
void describeDraftStop(std::ostringstream& summary, double draft_confidence) {
  if (draft_confidence > 0) summary << ", drafting stops below p " << draft_confidence;
}

std::vector<float> toFloats(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous().reshape({-1});
  const float* data = flat.data_ptr<float>();
  return std::vector<float>(data, data + flat.numel());
}

CacheGeometry geometryOf(const CausalLM* model) {
  CacheGeometry geometry;
  if (model == nullptr) return geometry;
  const ModelConfig& config = model->config();
  geometry.present = true;
  geometry.layers = config.num_layers;
  geometry.kv_heads = config.num_kv_heads;
  geometry.heads = config.num_heads;
  geometry.head_dim = config.head_dim;
  return geometry;
}

std::shared_ptr<const AttentionData> convertAttention(int64_t round, const VerifyRecord& record) {
  auto data = std::make_shared<AttentionData>();
  data->round = round;
  data->first_query_position = record.first_query_position;
  data->attention_dropped = record.attention_dropped;
  data->logits_dropped = record.logits_dropped;
  for (size_t l = 0; l < record.attention.size(); ++l) {
    const at::Tensor& layer = record.attention[l];
    // Layers must agree in heads and queries; keys may differ (a fault can
    // leave layers with different row counts). Anything else is dropped.
    if (!layer.defined() || layer.dim() != 3) break;
    if (l == 0) {
      data->heads = layer.size(0);
      data->queries = layer.size(1);
    } else if (layer.size(0) != data->heads || layer.size(1) != data->queries) {
      break;
    }
    data->keys.push_back(layer.size(2));
    data->layers.push_back(toFloats(layer));
    std::vector<uint8_t> mask;
    if (l < record.masks.size() && record.masks[l].defined() && record.masks[l].dim() == 2 &&
        record.masks[l].size(0) == data->queries && record.masks[l].size(1) == layer.size(2)) {
      const at::Tensor m = record.masks[l].to(torch::kUInt8).contiguous().reshape({-1});
      mask.assign(m.data_ptr<uint8_t>(), m.data_ptr<uint8_t>() + m.numel());
    }
    data->masks.push_back(std::move(mask));
  }
  if (record.logits.defined() && record.logits.dim() == 2) {
    const at::Tensor probs = torch::softmax(record.logits.to(torch::kFloat32), -1);
    const int64_t k = std::min<int64_t>(5, probs.size(1));
    const auto top = probs.topk(k, -1);
    const at::Tensor values = std::get<0>(top).contiguous();
    const at::Tensor ids = std::get<1>(top).contiguous();
    for (int64_t q = 0; q < probs.size(0); ++q) {
      std::vector<std::pair<int64_t, float>> row;
      for (int64_t i = 0; i < k; ++i) row.emplace_back(ids[q][i].item<int64_t>(), values[q][i].item<float>());
      data->top_tokens.push_back(std::move(row));
    }
  }
  return data;
}

// A converted round after the session's trace budget dropped its attention:
// the top tokens (a few numbers per query) stay.
std::shared_ptr<const AttentionData> withoutAttention(const AttentionData& converted) {
  auto data = std::make_shared<AttentionData>();
  data->round = converted.round;
  data->first_query_position = converted.first_query_position;
  data->top_tokens = converted.top_tokens;
  data->attention_dropped = true;
  data->logits_dropped = converted.logits_dropped;
  return data;
}

}  // namespace

void SnapshotBuilder::reset() {
  rows_.clear();
  attention_.clear();
}

void SnapshotBuilder::setNames(std::string target_name, std::string drafter_name) {
  target_name_ = std::move(target_name);
  drafter_name_ = std::move(drafter_name);
}

std::shared_ptr<const std::vector<std::string>> vocabularyOf(const Tokenizer& tokenizer) {
  auto vocab = std::make_shared<std::vector<std::string>>();
  const int64_t size = tokenizer.vocabSize();
  vocab->reserve(static_cast<size_t>(size));
  for (int64_t id = 0; id < size; ++id) {
    try {
      vocab->push_back(tokenizer.tokenText(id));
    } catch (const std::exception&) {
      vocab->push_back("<id " + std::to_string(id) + ">");
    }
  }
  return vocab;
}

void SnapshotBuilder::setVocabulary(const Tokenizer& tokenizer) { vocab_ = vocabularyOf(tokenizer); }

void SnapshotBuilder::fillRecord(SessionSnapshot& snapshot, const SessionRecord& record) {
  snapshot.sequence = record.sequence;
  snapshot.origins = record.origins;
  snapshot.prompt_length = record.prompt_length;
  snapshot.rounds = record.rounds;
  snapshot.events = record.events;
  snapshot.bookkeeping = record.bookkeeping;
  snapshot.fault = record.fault;
  snapshot.emitted_round.assign(snapshot.sequence.size(), 0);
  for (const RoundRecord& round : snapshot.rounds) {
    if (round.index < 1) continue;
    for (size_t i = 0; i < round.emitted.size(); ++i) {
      const size_t position = static_cast<size_t>(round.start_length) + i;
      if (position < snapshot.emitted_round.size()) snapshot.emitted_round[position] = round.index;
    }
  }

  snapshot.entries = record.ledger.entries();
  const auto row_count = static_cast<size_t>(record.ledger.rowCount());
  if (rows_.size() > row_count) rows_.clear();  // the ledger was restored or replaced
  while (rows_.size() < row_count) {
    const auto row_index = static_cast<int64_t>(rows_.size());
    auto row = std::make_shared<KvRowData>();
    row->k = toFloats(record.ledger.keys(row_index));
    row->v = toFloats(record.ledger.values(row_index));
    rows_.push_back(std::move(row));
  }
  snapshot.rows = rows_;

  for (const auto& [round, verify] : record.verify) {
    const auto cached = attention_.find(round);
    if (cached == attention_.end()) {
      if (!verify.attention.empty() || verify.logits.defined() || verify.attention_dropped) {
        attention_[round] = convertAttention(round, verify);
      }
    } else if (verify.attention_dropped && !cached->second->layers.empty()) {
      attention_[round] = withoutAttention(*cached->second);  // the budget applies to the views' copy too
    }
  }
  snapshot.attention = attention_;
}

std::shared_ptr<SessionSnapshot> SnapshotBuilder::build(const Session& session) {
  auto snapshot = std::make_shared<SessionSnapshot>();
  snapshot->target_name = target_name_;
  snapshot->drafter_name = drafter_name_;
  snapshot->target = geometryOf(&session.target());
  snapshot->drafter = geometryOf(session.drafter() ? session.drafter()->model() : nullptr);
  snapshot->vocab = vocab_;

  const SessionOptions& options = session.options();
  std::ostringstream summary;
  summary << "gamma " << options.gamma << (options.adaptive_gamma ? " (adaptive)" : "");
  describeDraftStop(summary, options.draft_confidence);
  summary << ", " << options.sampling.describe() << ", seed " << options.seed << ", cache "
          << (options.use_cache ? "on" : "off") << ", " << bookkeepingName(options.bookkeeping) << " bookkeeping";
  if (options.eviction) summary << ", evict " << options.eviction->describe();
  snapshot->options_summary = summary.str();
  snapshot->greedy = options.sampling.greedy;
  snapshot->use_cache = options.use_cache;

  snapshot->finished = session.finished();
  snapshot->next_phase = session.nextPhase();
  snapshot->current_round = session.currentRound();
  snapshot->current_gamma = session.currentGamma();

  fillRecord(*snapshot, session.record());
  snapshot->metrics = session.metrics();
  return snapshot;
}

std::shared_ptr<SessionSnapshot> SnapshotBuilder::build(const SessionRecord& record) {
  reset();
  auto snapshot = std::make_shared<SessionSnapshot>();
  snapshot->replay_only = true;
  snapshot->finished = true;
  snapshot->use_cache = record.use_cache;
  fillRecord(*snapshot, record);
  snapshot->metrics = computeMetrics(record.rounds);
  const Moment last = record.lastMoment();
  snapshot->current_round = last.round + 1;
  snapshot->next_phase = Phase::Draft;
  return snapshot;
}

std::vector<std::vector<int64_t>> batchAcceptance(const std::vector<const std::vector<RoundRecord>*>& sequences,
                                                  size_t rounds) {
  std::vector<std::vector<int64_t>> out;
  for (const std::vector<RoundRecord>* sequence : sequences) {
    std::vector<int64_t> accepted(rounds, -1);
    for (const RoundRecord& r : *sequence) {
      if (r.index > 0 && static_cast<size_t>(r.index) < rounds && r.prune_done) accepted[static_cast<size_t>(r.index)] = r.accepted;
    }
    out.push_back(std::move(accepted));
  }
  return out;
}

std::shared_ptr<SessionSnapshot> SnapshotBuilder::build(const TraceData& trace, int64_t sequence) {
  reset();
  require(sequence >= 0 && sequence < trace.sequences(), "trace: no sequence " + std::to_string(sequence) + " (the trace holds " +
                                                           std::to_string(trace.sequences()) + ")");
  const SessionRecord& record = trace.sequence(sequence);
  auto snapshot = std::make_shared<SessionSnapshot>();
  const nlohmann::json& info = trace.info;
  const auto text = [&](const nlohmann::json::json_pointer& at, const std::string& fallback) {
    return info.contains(at) && info.at(at).is_string() ? info.at(at).get<std::string>() : fallback;
  };
  using Ptr = nlohmann::json::json_pointer;
  snapshot->target_name = text(Ptr("/target/name"), text(Ptr("/target/architecture"), "target"));
  snapshot->drafter_name = text(Ptr("/drafter/description"), "none");
  snapshot->replay_only = true;
  snapshot->finished = info.value("finished", true);
  if (info.contains("options") && info["options"].is_object()) {
    const nlohmann::json& o = info["options"];
    std::ostringstream summary;
    summary << "gamma " << o.value("gamma", 0) << (o.value("adaptive_gamma", false) ? " (adaptive)" : "");
    const auto stop = o.find("draft_confidence");  // absent from traces before the option
    if (stop != o.end() && stop->is_number()) describeDraftStop(summary, stop->get<double>());
    summary << ", " << o.value("sampling", std::string("?")) << ", seed " << o.value("seed", 0) << ", cache "
            << (o.value("use_cache", true) ? "on" : "off") << ", " << o.value("bookkeeping", std::string("?"))
            << " bookkeeping";
    const auto eviction = o.find("eviction");
    if (eviction != o.end() && eviction->is_string() && *eviction != "none") summary << ", evict " << eviction->get<std::string>();
    snapshot->options_summary = summary.str();
    snapshot->greedy = o.value("sampling", std::string("greedy")).rfind("greedy", 0) == 0;
    snapshot->use_cache = o.value("use_cache", true);
  }
  // Geometry from the stored rows ([layers, kv_heads, head_dim]) and attention.
  for (const LedgerEntry& entry : record.ledger.entries()) {
    CacheGeometry& geometry = entry.cache == CacheRole::Target ? snapshot->target : snapshot->drafter;
    if (geometry.present) continue;
    const at::Tensor row = record.ledger.keys(entry.row);
    if (row.dim() != 3) continue;
    geometry.present = true;
    geometry.layers = row.size(0);
    geometry.kv_heads = row.size(1);
    geometry.head_dim = row.size(2);
  }
  for (const auto& [round, record] : record.verify) {
    if (!record.attention.empty() && record.attention.front().dim() == 3) {
      snapshot->target.heads = record.attention.front().size(0);
      break;
    }
  }
  int64_t max_id = -1;
  for (const auto& [id, token] : trace.token_text) max_id = std::max(max_id, id);
  auto vocab = std::make_shared<std::vector<std::string>>();
  for (int64_t id = 0; id <= max_id; ++id) {
    const auto found = trace.token_text.find(id);
    vocab->push_back(found != trace.token_text.end() ? found->second : "<id " + std::to_string(id) + ">");
  }
  snapshot->vocab = vocab;

  fillRecord(*snapshot, record);
  snapshot->metrics = computeMetrics(record.rounds);
  snapshot->prompt = text(Ptr("/prompt"), "");
  if (info.contains("investigation") && info["investigation"].is_object()) {
    const nlohmann::json& investigation = info["investigation"];
    // A batch keeps every sequence's diff; one sequence, its own.
    const nlohmann::json* saved = nullptr;
    if (investigation.contains("sequence_diffs") && investigation["sequence_diffs"].is_array()) {
      const nlohmann::json& diffs = investigation["sequence_diffs"];
      if (static_cast<size_t>(sequence) < diffs.size() && diffs[static_cast<size_t>(sequence)].is_object()) {
        saved = &diffs[static_cast<size_t>(sequence)];
      }
    } else if (sequence == 0 && investigation.contains("diff") && investigation["diff"].is_object()) {
      saved = &investigation["diff"];
    }
    if (saved) {
      DiffReport diff = diffReportFromJson(*saved);
      // The views size plots by what it names: it must fit the trace: a hostile one must not make it draw past its rows.
      for (const std::string& warning : fitInvestigation(diff, record)) {
        spdlog::warn("{}", warning);
        snapshot->notes.push_back(warning);
      }
      snapshot->diff = std::make_shared<const DiffReport>(std::move(diff));
    }
  }
  if (trace.sequences() > 1) {
    std::vector<const std::vector<RoundRecord>*> sequences;
    for (int64_t b = 0; b < trace.sequences(); ++b) sequences.push_back(&trace.sequence(b).rounds);
    snapshot->batch_accepted = batchAcceptance(sequences, snapshot->rounds.size());
    snapshot->shown_sequence = sequence;
  }
  // Where the session stood: saved by the GUI, else inferred from the last round.
  if (info.contains("state") && info["state"].is_object()) {
    snapshot->current_round = info["state"].value("current_round", int64_t{0});
    snapshot->next_phase = static_cast<Phase>(info["state"].value("next_phase", 1));
    snapshot->current_gamma = info["state"].value("current_gamma", int64_t{0});
  } else if (!record.rounds.empty()) {
    const RoundRecord& last = record.rounds.back();
    snapshot->current_gamma = last.gamma;
    if (last.index == 0 || last.next_token >= 0) {
      snapshot->current_round = last.index + 1;
      snapshot->next_phase = Phase::Draft;
    } else {
      snapshot->current_round = last.index;
      snapshot->next_phase = record.verify.count(last.index) ? Phase::Accept : Phase::Verify;
    }
  }
  return snapshot;
}

}  // namespace kvscope
