#include "core/check/reference_streams.h"

#include <torch/types.h>

#include <algorithm>

#include "core/model/probe_recorder.h"
#include "core/model/scoring.h"

namespace kvscope {
namespace {

// Feeds tokens at `start` on `cache` (which holds exactly the positions before).
StreamReference::Chunk feed(const CausalLM& model, KvCache& cache, const std::vector<int64_t>& tokens, int64_t start) {
  ProbeRecorder probe({Probe::Key, Probe::Value});
  StreamReference::Chunk chunk;
  chunk.start = start;
  chunk.logits = model.forward(idsTensor(tokens), start, &cache, &probe).to(torch::kFloat32);  // [n, vocab]
  chunk.keys = probe.perLayer(Probe::Key);  // per layer [kv_heads, n, head_dim]
  chunk.values = probe.perLayer(Probe::Value);
  return chunk;
}

}  // namespace

const StreamReference::Chunk& StreamReference::chunkOf(int64_t position) const {
  if (position >= split_) return continuation_;
  // The last chunk starting at or before `position`.
  const auto it = std::upper_bound(committed_->begin(), committed_->end(), position,
                                   [](int64_t p, const Chunk& c) { return p < c.start; });
  return *(it - 1);
}

at::Tensor StreamReference::key(int64_t layer, int64_t position) const {
  const Chunk& c = chunkOf(position);
  return c.keys[static_cast<size_t>(layer)].select(1, position - c.start);
}

at::Tensor StreamReference::value(int64_t layer, int64_t position) const {
  const Chunk& c = chunkOf(position);
  return c.values[static_cast<size_t>(layer)].select(1, position - c.start);
}

at::Tensor StreamReference::logits(int64_t position) const {
  const Chunk& c = chunkOf(position);
  return c.logits[position - c.start];
}

ReferenceStreams::ReferenceStreams(const CausalLM& model, std::vector<int64_t> committed)
    : model_(model),
      committed_tokens_(std::move(committed)),
      cache_(model.makeCache()),
      chunks_(std::make_shared<std::vector<StreamReference::Chunk>>()) {}

void ReferenceStreams::extendCommitted(int64_t end) {
  c10::InferenceMode guard;
  const int64_t from = cache_->length();
  if (end <= from) return;
  StreamReference::Chunk chunk = feed(model_, *cache_, {committed_tokens_.begin() + from, committed_tokens_.begin() + end}, from);
  if (end <= known_) return;  // re-fed after a cut: those rows are known already
  const int64_t skip = known_ - from;
  if (skip > 0) {
    for (auto& k : chunk.keys) k = k.narrow(1, skip, end - known_);
    for (auto& v : chunk.values) v = v.narrow(1, skip, end - known_);
    chunk.logits = chunk.logits.narrow(0, skip, end - known_);
    chunk.start = known_;
  }
  chunks_->push_back(std::move(chunk));
  known_ = end;
}

StreamReference ReferenceStreams::of(const std::vector<int64_t>& stream) {
  c10::InferenceMode guard;
  const auto shared = std::mismatch(stream.begin(), stream.end(), committed_tokens_.begin(), committed_tokens_.end());
  const int64_t split = shared.first - stream.begin();
  if (cache_->length() > split) cache_->crop(split);
  extendCommitted(split);
  StreamReference ref;
  ref.committed_ = chunks_;
  ref.split_ = split;
  ref.length_ = static_cast<int64_t>(stream.size());
  if (split < ref.length_) {
    ref.continuation_ = feed(model_, *cache_, {stream.begin() + split, stream.end()}, split);
    cache_->crop(split);  // the drafts are this stream's alone
  }
  return ref;
}

CaptureReferences::CaptureReferences(std::array<const CausalLM*, kCaptureRoles> models,
                                     const std::vector<int64_t>& committed,
                                     const std::vector<std::vector<int64_t>>& streams)
    : models_(models), committed_(committed), streams_(streams) {}

ReferenceStreams& CaptureReferences::streamsOf(CaptureRole role) {
  const auto r = static_cast<size_t>(role);
  if (!references_[r]) references_[r] = std::make_unique<ReferenceStreams>(*models_[r], committed_);
  return *references_[r];
}

const StreamReference* CaptureReferences::ofStream(CaptureRole role, int64_t stream) {
  if (!has(role)) return nullptr;
  const auto key = std::make_pair(static_cast<int>(role), stream);
  auto it = made_.find(key);
  if (it == made_.end()) it = made_.emplace(key, streamsOf(role).of(streams_.at(static_cast<size_t>(stream)))).first;
  return &it->second;
}

StreamReference CaptureReferences::of(CaptureRole role, const std::vector<int64_t>& tokens) {
  return streamsOf(role).of(tokens);
}

}  // namespace kvscope
