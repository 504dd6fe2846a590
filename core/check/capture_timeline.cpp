#include "core/check/capture_timeline.h"

#include <torch/types.h>

#include <algorithm>
#include <map>
#include <unordered_set>

#include "core/capture/capture_change.h"
#include "core/error.h"

namespace kvscope {
namespace {

using Slots = std::vector<std::vector<int64_t>>;  // per layer, the row id of each slot (-1: empty)

// Where a target call's inputs belong in the committed sequence, and how many
// of them it confirms.
struct TargetPlacement {
  int64_t start = 0;
  int64_t matched = 0;
  int64_t required = 0;  // the rows the call's cache must hold: the frontier (0 for a call without a cache)
  int64_t frontier = 0;  // the committed tokens decided before the call
};

// Row identities the timeline cannot know: a row written between calls, or
// one no input of the writing call accounts for.
constexpr int64_t kUnknownPosition = -2;
constexpr int64_t kEmptyPosition = -1;

Slots slotsOf(const std::optional<CaptureCacheState>& state, int64_t layers) {
  Slots slots(static_cast<size_t>(layers));
  if (!state) return slots;
  for (size_t l = 0; l < slots.size(); ++l) slots[l] = state->layers[l].slotRows();
  return slots;
}

std::vector<CaptureLayerKind> kindsOf(const std::optional<CaptureCacheState>& state, int64_t layers,
                                      const std::vector<CaptureLayerKind>& fallback) {
  if (!state) return fallback.empty() ? std::vector<CaptureLayerKind>(static_cast<size_t>(layers)) : fallback;
  std::vector<CaptureLayerKind> kinds;
  for (const CaptureLayerState& layer : state->layers) kinds.push_back(layer.kind);
  return kinds;
}

int64_t heldRows(const std::vector<int64_t>& slots) {
  return std::count_if(slots.begin(), slots.end(), [](int64_t row) { return row >= 0; });
}

bool matchesAt(const std::vector<int64_t>& stream, int64_t at, const std::vector<int64_t>& tokens, size_t count) {
  if (at < 0 || at + static_cast<int64_t>(count) > static_cast<int64_t>(stream.size())) return false;
  return std::equal(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(count),
                    stream.begin() + at);
}

// The engine's own view when the capture has no rec.commit: each target call
// overwrites the sequence from the position it claims.
std::vector<int64_t> inferCommitted(const CaptureManifest& manifest) {
  std::vector<int64_t> sequence;
  for (const CaptureCall& call : manifest.calls) {
    if (call.role != CaptureRole::Target) continue;
    sequence.resize(std::min<size_t>(sequence.size(), static_cast<size_t>(call.positions.front())));
    sequence.insert(sequence.end(), call.input_ids.begin(), call.input_ids.end());
  }
  return sequence;
}

// How many of `ids` match `sequence` from `at` on.
int64_t matchLength(const std::vector<int64_t>& sequence, int64_t at, const std::vector<int64_t>& ids) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(ids.size()) && at + n < static_cast<int64_t>(sequence.size()) &&
         ids[static_cast<size_t>(n)] == sequence[static_cast<size_t>(at + n)]) {
    ++n;
  }
  return n;
}

// Where tokens fed again may start: the sequence's start (a prefix fed again)
// or just before `near` (a few tokens fed twice). A bounded set, so a hostile
// capture cannot make the search quadratic.
std::vector<int64_t> refeedCandidates(int64_t near) {
  constexpr int64_t kRecent = 64;
  std::vector<int64_t> candidates{0};
  for (int64_t s = std::max<int64_t>(1, near - kRecent); s < near; ++s) candidates.push_back(s);
  return candidates;
}

// Where each target call's inputs belong, from the committed sequence alone:
// an engine's own positions and cache sizes are what the check is about, so
// they cannot be the reference. A call normally starts at the frontier with
// its committed token; one that starts elsewhere in the sequence (the prefix
// fed again, a call without a cache) is placed where its tokens are.
std::vector<TargetPlacement> placeTargetCalls(const CaptureManifest& manifest, const std::vector<int64_t>& committed) {
  std::vector<TargetPlacement> placements;
  int64_t frontier = 0;
  for (const CaptureCall& call : manifest.calls) {
    if (call.role != CaptureRole::Target) continue;
    TargetPlacement p{frontier, matchLength(committed, frontier, call.input_ids), frontier, frontier};
    const bool holds_nothing = !call.before || heldRows(call.before->layers.front().slotRows()) == 0;
    const int64_t from_start = matchLength(committed, 0, call.input_ids);
    if (holds_nothing && frontier > 0 && from_start > frontier) {
      p = {0, from_start, 0, frontier};  // no cache, the whole sequence again: a call without a cache
    } else if (p.matched == 0) {
      for (int64_t s : refeedCandidates(frontier)) {
        const int64_t m = s < frontier ? matchLength(committed, s, call.input_ids) : 0;
        if (m > 0 && m >= p.matched) p = {s, m, frontier, frontier};
      }
    }
    placements.push_back(p);
    frontier = std::max(frontier, p.start + p.matched);
  }
  return placements;
}

// What a check may hold in memory, whatever the file says: the streams copy
// a prefix of the committed sequence per target call, the ledger keeps every
// row's K/V of every layer. A capture of a real run stays far below both.
constexpr int64_t kMaxStreamTokens = int64_t{1} << 25;  // 256 MB of ids
constexpr int64_t kMaxLedgerFloats = int64_t{1} << 28;  // 1 GiB of K/V

// Round k's stream: the committed tokens target call k's inputs confirm,
// then its drafts; a call whose first input is not committed gets C's token
// there (so that input is wrong). After the last target call, C.
std::vector<std::vector<int64_t>> roundStreams(const CaptureManifest& manifest, const std::vector<int64_t>& committed,
                                               const std::vector<TargetPlacement>& placements, const std::string& path) {
  const auto committed_size = static_cast<int64_t>(committed.size());
  int64_t total = committed_size;
  size_t t = 0;
  for (const CaptureCall& call : manifest.calls) {
    if (call.role != CaptureRole::Target) continue;
    total += std::min(placements[t++].start, committed_size) + 1 + static_cast<int64_t>(call.input_ids.size());
    if (total > kMaxStreamTokens) {
      throw Error(path + ": too large to check: the token streams of its " + std::to_string(t) +
                  " target calls exceed " + std::to_string(kMaxStreamTokens) + " tokens");
    }
  }
  std::vector<std::vector<int64_t>> streams;
  size_t k = 0;
  for (const CaptureCall& call : manifest.calls) {
    if (call.role != CaptureRole::Target) continue;
    const TargetPlacement p = placements[k++];
    int64_t kept = std::min(p.start + p.matched, committed_size);
    int64_t skip = p.matched;
    if (p.matched == 0 && p.start < committed_size) {
      kept = p.start + 1;
      skip = 1;
    }
    std::vector<int64_t> stream(committed.begin(), committed.begin() + kept);
    stream.insert(stream.end(), call.input_ids.begin() + std::min<int64_t>(skip, call.input_ids.size()), call.input_ids.end());
    streams.push_back(std::move(stream));
  }
  streams.push_back(committed);
  return streams;
}

// Where a drafter call's inputs belong in its round's stream: where the
// engine put them when the tokens are there, else the nearest place that
// holds them (a prefix fed again, a skipped token), else where it put them.
int64_t alignInputs(const std::vector<int64_t>& stream, const std::vector<int64_t>& ids, int64_t claimed) {
  if (matchesAt(stream, claimed, ids, ids.size())) return claimed;
  constexpr int64_t kNear = 64;  // a bounded search: a hostile capture cannot make it quadratic
  std::vector<int64_t> candidates = refeedCandidates(claimed);
  for (int64_t s = claimed; s <= claimed + kNear; ++s) candidates.push_back(s);
  int64_t best = -1;
  for (int64_t s : candidates) {
    if (matchesAt(stream, s, ids, ids.size()) && (best < 0 || std::abs(s - claimed) < std::abs(best - claimed))) best = s;
  }
  return best >= 0 ? best : claimed;
}

// Where a drafter call's inputs belong in the drafter's own stream of the
// round, which grows by the drafts it feeds: inputs that read on from where
// the engine put them and run past the stream's end are its new drafts (the
// stream takes them); inputs found elsewhere in the stream (a prefix fed
// again, a token fed twice) are placed there; a first input fed where the
// last committed token belongs, which is not that token, is a draft fed
// before it: that token was skipped. Anything else stays where the engine
// put it, to be named as a wrong token.
int64_t placeDrafterInputs(std::vector<int64_t>& stream, const std::vector<int64_t>& ids, int64_t claimed) {
  const auto size = static_cast<int64_t>(stream.size());
  const auto n = static_cast<int64_t>(ids.size());
  const auto runsOnFrom = [&](int64_t at) {
    return at >= 0 && at <= size && at + n > size &&
           std::equal(ids.begin(), ids.begin() + (size - at), stream.begin() + at);
  };
  const auto extendFrom = [&](int64_t at) {
    stream.insert(stream.end(), ids.begin() + (size - at), ids.end());
    return at;
  };
  if (matchesAt(stream, claimed, ids, ids.size())) return claimed;
  if (runsOnFrom(claimed)) return extendFrom(claimed);
  const int64_t found = alignInputs(stream, ids, claimed);
  if (found != claimed) return found;
  if (claimed == size - 1 && size > 0) return extendFrom(size);
  return claimed;
}

// The slots a static or ring layer's call attends: up to its highest cache
// position (its inputs), or before its first (the rows it receives).
int64_t staticLimit(const CaptureCall& call, bool for_inputs) {
  const std::vector<int64_t>& at = call.cache_position ? *call.cache_position : call.positions;
  return for_inputs ? *std::max_element(at.begin(), at.end()) + 1 : at.front();
}

class TimelineBuilder {
 public:
  explicit TimelineBuilder(const CaptureFile& file) : file_(file), manifest_(file.manifest()) {}

  CaptureTimeline build() {
    out_.committed_inferred = !manifest_.committed.has_value();
    out_.record.sequence = manifest_.committed ? *manifest_.committed : inferCommitted(manifest_);
    placements_ = placeTargetCalls(manifest_, out_.record.sequence);
    out_.streams = roundStreams(manifest_, out_.record.sequence, placements_, file_.path());
    for (const auto& stream : out_.streams) stream_tokens_ += static_cast<int64_t>(stream.size());
    for (const TargetPlacement& p : placements_) out_.frontiers.push_back(p.frontier);
    out_.frontiers.push_back(placements_.empty() ? 0 : std::max(placements_.back().frontier, placements_.back().start + placements_.back().matched));
    for (int r = 0; r < kCaptureRoles; ++r) {
      if (manifest_.models[r]) startRole(static_cast<CaptureRole>(r));
    }
    out_.record.use_cache = true;
    int64_t targets_seen = 0;
    for (call_index_ = 0; call_index_ < manifest_.calls.size(); ++call_index_) {
      const CaptureCall& call = manifest_.calls[call_index_];
      addCall(call, targets_seen);
      if (call.role == CaptureRole::Target) ++targets_seen;
    }
    return std::move(out_);
  }

 private:
  struct RoleState {
    int64_t layers = 0;
    int64_t kv_heads = 0;
    int64_t head_dim = 0;
    std::vector<std::vector<int64_t>> entry_of_row;  // per layer, row id -> ledger entry (-1: not met yet)
    Slots returned;                                  // the previous call's after state
    std::vector<CaptureLayerKind> kinds;
    std::vector<int64_t> last_rows;                  // rows per layer of the last event's layout
  };

  RoleState& state(CaptureRole role) { return roles_[static_cast<int>(role)]; }

  void startRole(CaptureRole role) {
    RoleState& s = state(role);
    const CaptureModel& model = *manifest_.model(role);
    s.layers = model.layers;
    if (s.layers <= 0) throw Error(file_.path() + ": the " + captureRoleName(role) + " has no cache layers to check");
    for (int64_t l = 0; l < s.layers; ++l) {
      const auto& shape = file_.rows(role, l, CaptureKV::Keys).shape();  // [kv_heads, n_rows, head_dim]
      if (l == 0) {
        s.kv_heads = shape[0];
        s.head_dim = shape[2];
      } else if (shape[0] != s.kv_heads || shape[2] != s.head_dim) {
        throw Error(file_.path() + ": " + captureRoleName(role) + " layer " + std::to_string(l) +
                    " has another K/V shape than layer 0; kvscope checks captures whose layers agree");
      }
      s.entry_of_row.emplace_back(static_cast<size_t>(file_.rowCount(role, l)), -1);
    }
    s.returned.resize(static_cast<size_t>(s.layers));
    s.last_rows.assign(static_cast<size_t>(s.layers), 0);
    (role == CaptureRole::Target ? out_.record.target_layers : out_.record.drafter_layers) = s.layers;
    const auto& config = model.config;
    out_.window[static_cast<int>(role)] = config.sliding_window.value_or(0);
    if (config.sliding_layers) sliding_[static_cast<int>(role)] = *config.sliding_layers;
    // A hybrid model's recurrent layers keep states, not rows (docs/capture-format-v3.md, "Recurrent state").
    recurrent_[static_cast<int>(role)].assign(static_cast<size_t>(s.layers), false);
    for (const auto& recurrent : manifest_.recurrent_states[static_cast<int>(role)])
      if (recurrent.layer < s.layers) recurrent_[static_cast<int>(role)][static_cast<size_t>(recurrent.layer)] = true;
    out_.empty_entry[static_cast<int>(role)] =
        birth(role, {{-1, kEmptyPosition, kEmptyPosition}}, {std::vector<int64_t>(static_cast<size_t>(s.layers), -1)}, 0,
              Phase::Prefill);
  }

  // New ledger entries with their K/V from the capture; rows[i][l] is the
  // row id of entry i in layer l (-1: that layer does not hold it, zeros).
  int64_t birth(CaptureRole role, const std::vector<RowIdentity>& identities,
                const std::vector<std::vector<int64_t>>& rows, int64_t round, Phase phase) {
    RoleState& s = state(role);
    const int64_t n = static_cast<int64_t>(identities.size());
    ledger_floats_ += 2 * n * s.layers * s.kv_heads * s.head_dim;
    if (ledger_floats_ > kMaxLedgerFloats) {
      throw Error(file_.path() + ": too large to check: its rows of every layer would take more than " +
                  std::to_string(kMaxLedgerFloats * 4 >> 20) + " MB");
    }
    std::vector<at::Tensor> keys, values;
    for (int64_t l = 0; l < s.layers; ++l) {
      auto k = torch::zeros({s.kv_heads, n, s.head_dim});  // [kv_heads, n, head_dim]
      auto v = torch::zeros({s.kv_heads, n, s.head_dim});
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = rows[static_cast<size_t>(i)][static_cast<size_t>(l)];
        if (row < 0) continue;
        k.select(1, i).copy_(rowTensor(role, l, CaptureKV::Keys, row));
        v.select(1, i).copy_(rowTensor(role, l, CaptureKV::Values, row));
      }
      keys.push_back(k);
      values.push_back(v);
    }
    const int64_t first = out_.record.ledger.recordBirths(cacheRoleOf(role), identities, keys, values, round, phase);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t l = 0; l < s.layers; ++l) {
        const int64_t row = rows[static_cast<size_t>(i)][static_cast<size_t>(l)];
        if (row >= 0) s.entry_of_row[static_cast<size_t>(l)][static_cast<size_t>(row)] = first + i;
      }
    }
    return first;
  }

  at::Tensor rowTensor(CaptureRole role, int64_t layer, CaptureKV part, int64_t row) const {
    const RoleState& s = roles_[static_cast<int>(role)];
    std::vector<float> data = file_.rowsFloat32(role, layer, part, row, 1);  // [kv_heads, 1, head_dim]
    return torch::from_blob(data.data(), {s.kv_heads, s.head_dim}, torch::kFloat32).clone();
  }

  // Rows of `slots` no earlier state of the role held: written between calls.
  void adoptUnknownRows(CaptureRole role, const Slots& slots, int64_t round) {
    RoleState& s = state(role);
    std::vector<RowIdentity> identities;
    std::vector<std::vector<int64_t>> rows;
    for (int64_t l = 0; l < s.layers; ++l) {
      for (int64_t row : slots[static_cast<size_t>(l)]) {
        if (row < 0 || s.entry_of_row[static_cast<size_t>(l)][static_cast<size_t>(row)] >= 0) continue;
        identities.push_back({-1, kUnknownPosition, kUnknownPosition});
        rows.emplace_back(static_cast<size_t>(s.layers), -1);
        rows.back()[static_cast<size_t>(l)] = row;
      }
    }
    if (!identities.empty()) birth(role, identities, rows, round, Phase::Prune);
  }

  // The entries a layer's call attends, in position order: an append layer's
  // rows; a static or ring layer's slots up to `static_limit`, a ring's
  // sorted by position (its physical order rotates), empty slots first.
  std::vector<int64_t> checkedRows(CaptureRole role, int64_t layer, const std::vector<int64_t>& slots,
                                   CaptureLayerKind kind, int64_t static_limit) const {
    const RoleState& s = roles_[static_cast<int>(role)];
    const int64_t empty = out_.empty_entry[static_cast<int>(role)];
    std::vector<int64_t> entries;
    // Static and ring layers: slot j is attended by an input at cache position c iff j <= c.
    const size_t count =
        kind == CaptureLayerKind::Append ? slots.size()
                                         : std::min<size_t>(slots.size(), static_cast<size_t>(std::max<int64_t>(0, static_limit)));
    for (size_t i = 0; i < count; ++i) {
      entries.push_back(slots[i] < 0 ? empty : s.entry_of_row[static_cast<size_t>(layer)][static_cast<size_t>(slots[i])]);
    }
    if (kind == CaptureLayerKind::Ring) {
      const auto& ledger = out_.record.ledger;
      std::stable_sort(entries.begin(), entries.end(), [&](int64_t a, int64_t b) {
        return ledger.entry(a).position < ledger.entry(b).position;
      });
    }
    return entries;
  }

  std::vector<std::vector<int64_t>> checkedLayout(CaptureRole role, const Slots& slots,
                                                  const std::vector<CaptureLayerKind>& kinds, int64_t static_limit) const {
    std::vector<std::vector<int64_t>> layout;
    for (size_t l = 0; l < slots.size(); ++l) {
      layout.push_back(checkedRows(role, static_cast<int64_t>(l), slots[l], kinds[l], static_limit));
    }
    return layout;
  }

  bool recurrentLayer(CaptureRole role, size_t layer) const {
    const auto& recurrent = recurrent_[static_cast<int>(role)];
    return layer < recurrent.size() && recurrent[layer];
  }

  bool slidingLayer(CaptureRole role, size_t layer) const {
    const auto& sliding = sliding_[static_cast<int>(role)];
    return out_.window[static_cast<int>(role)] > 0 && (sliding.empty() || (layer < sliding.size() && sliding[layer]));
  }

  // What each layer must hold after an event: positions [first, end). A ring
  // holds its window only. A growing (append) layer of a sliding-window model
  // may keep every row (the mask does the window) or drop the ones the window
  // has left, never one it still needs: after a forward, the last input's
  // window (W rows); between calls, the next input's (W - 1 rows before it).
  void setContract(CacheEvent& e, CaptureRole role, const std::vector<CaptureLayerKind>& kinds, int64_t end,
                   int64_t ring_rows, const std::vector<std::vector<int64_t>>& layout, bool between) const {
    e.expected_rows = end;
    const int64_t window = out_.window[static_cast<int>(role)];
    for (size_t l = 0; l < kinds.size(); ++l) {
      int64_t first = 0;
      if (recurrentLayer(role, l)) {
        first = end;  // a recurrent layer holds no rows: [end, end)
      } else if (kinds[l] == CaptureLayerKind::Ring) {
        first = std::max<int64_t>(0, end - (window > 0 ? window : ring_rows));
      } else if (kinds[l] == CaptureLayerKind::Append && slidingLayer(role, l) && !layout[l].empty()) {
        const int64_t needed = std::max<int64_t>(0, end - window + (between ? 1 : 0));
        first = std::clamp<int64_t>(out_.record.ledger.entry(layout[l].front()).position, 0, needed);
      }
      if (first == 0) continue;
      e.expected_first.resize(kinds.size(), 0);
      e.expected_first[l] = first;
    }
  }

  // A drafter may keep any prefix of its round's stream: the rows of its
  // first layer that hold it, from the first.
  int64_t validPrefix(const std::vector<int64_t>& rows, const std::vector<int64_t>& stream, bool ring) const {
    const auto& ledger = out_.record.ledger;
    size_t i = 0;
    while (ring && i < rows.size() && ledger.entry(rows[i]).position < 0) ++i;
    int64_t expected = ring && i < rows.size() ? ledger.entry(rows[i]).position : 0;
    for (; i < rows.size(); ++i, ++expected) {
      const LedgerEntry& e = ledger.entry(rows[i]);
      if (e.position != expected || e.rope_position != expected || expected >= static_cast<int64_t>(stream.size()) ||
          e.token != stream[static_cast<size_t>(expected)]) {
        break;
      }
    }
    return expected;
  }

  void record(CaptureStep step, CacheEvent e, std::vector<std::vector<int64_t>> layout) {
    RoleState& s = state(step.role);
    e.cache = cacheRoleOf(step.role);
    e.round = step.round;
    e.call = std::string(captureRoleName(step.role)) + " call " + std::to_string(step.call) +
             (step.operation == CaptureOperation::Between ? ", between calls" : "");
    e.rows_before = s.last_rows;
    for (const auto& rows : layout) e.rows_after.push_back(static_cast<int64_t>(rows.size()));
    s.last_rows = e.rows_after;
    e.layout = std::move(layout);
    out_.record.events.record(std::move(e));
    out_.steps.push_back(step);
  }

  void addBetween(const CaptureCall& call, const Slots& before, const std::vector<CaptureLayerKind>& kinds,
                  int64_t round, int64_t stream_index, int64_t target_start) {
    RoleState& s = state(call.role);
    CaptureStep step;
    step.role = call.role;
    step.call = call.index;
    step.operation = CaptureOperation::Between;
    step.change = deriveStateChange(s.returned, before);
    // A prefix kept is a crop() or a slice; only the recorder saw whether the
    // cache object was the same. Its hint names the operation, never the verdict.
    if (step.change == CaptureBetweenKind::Crop && call.between && call.between->kind == CaptureBetweenKind::Slice) {
      step.change = CaptureBetweenKind::Slice;
    }
    step.round = round;
    step.stream = stream_index;
    step.static_cache = kinds.front() == CaptureLayerKind::Static;
    step.manifest_call = call_index_;
    auto layout = checkedLayout(call.role, before, kinds, staticLimit(call, false));
    CacheEvent e;
    e.phase = Phase::Prune;
    switch (step.change) {
      case CaptureBetweenKind::None:
      case CaptureBetweenKind::Crop: e.kind = CacheEventKind::Crop; break;
      case CaptureBetweenKind::Reset: e.kind = CacheEventKind::Reset; break;
      default: e.kind = CacheEventKind::Rewrite; break;
    }
    const auto& stream = out_.streams[static_cast<size_t>(stream_index)];
    const int64_t end = call.role == CaptureRole::Target
                            ? target_start
                            : validPrefix(layout.front(), stream, kinds.front() == CaptureLayerKind::Ring);
    setContract(e, call.role, kinds, end, static_cast<int64_t>(before.front().size()), layout, true);
    record(step, std::move(e), std::move(layout));
  }

  // The input index that wrote each new row of the call's after state, per layer.
  std::vector<std::vector<int64_t>> rowsByInput(const CaptureCall& call, const Slots& before, const Slots& after,
                                                const std::vector<CaptureLayerKind>& kinds,
                                                std::vector<std::pair<int64_t, int64_t>>& unattributed) const {
    const RoleState& s = roles_[static_cast<int>(call.role)];
    const int64_t n = static_cast<int64_t>(call.input_ids.size());
    std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(s.layers), -1));
    for (int64_t l = 0; l < s.layers; ++l) {
      const auto& was = before[static_cast<size_t>(l)];
      const auto& now = after[static_cast<size_t>(l)];
      const std::unordered_set<int64_t> known(was.begin(), was.end());
      std::vector<std::pair<size_t, int64_t>> fresh;  // (slot, row id)
      for (size_t slot = 0; slot < now.size(); ++slot) {
        if (now[slot] >= 0 && known.count(now[slot]) == 0 &&
            s.entry_of_row[static_cast<size_t>(l)][static_cast<size_t>(now[slot])] < 0) {
          fresh.emplace_back(slot, now[slot]);
        }
      }
      for (size_t j = 0; j < fresh.size(); ++j) {
        const auto [slot, row] = fresh[j];
        int64_t input = -1;
        if (kinds[static_cast<size_t>(l)] == CaptureLayerKind::Append) {
          input = static_cast<int64_t>(slot) - static_cast<int64_t>(was.size());
        } else if (kinds[static_cast<size_t>(l)] == CaptureLayerKind::Static) {
          const auto& at = call.cache_position ? *call.cache_position : call.positions;
          const auto it = std::find(at.begin(), at.end(), static_cast<int64_t>(slot));
          if (it != at.end()) input = it - at.begin();
        } else {  // a ring keeps the call's last rows, written in order
          input = n - static_cast<int64_t>(fresh.size()) + static_cast<int64_t>(j);
        }
        if (input >= 0 && input < n && rows[static_cast<size_t>(input)][static_cast<size_t>(l)] < 0) {
          rows[static_cast<size_t>(input)][static_cast<size_t>(l)] = row;
        } else {
          unattributed.emplace_back(l, row);
        }
      }
    }
    return rows;
  }

  void addForward(const CaptureCall& call, const Slots& before, const Slots& after,
                  const std::vector<CaptureLayerKind>& kinds, int64_t round, int64_t stream_index, int64_t target_start) {
    RoleState& s = state(call.role);
    auto& stream = out_.streams[static_cast<size_t>(stream_index)];
    CaptureStep step;
    step.round = round;
    step.role = call.role;
    step.call = call.index;
    step.operation = CaptureOperation::Forward;
    step.stream = stream_index;
    step.inputs = static_cast<int64_t>(call.input_ids.size());
    step.claimed_start = call.positions.front();
    const auto stream_was = static_cast<int64_t>(stream.size());
    step.true_start = call.role == CaptureRole::Target ? target_start
                                                       : placeDrafterInputs(stream, call.input_ids, step.claimed_start);
    addStreamTokens(static_cast<int64_t>(stream.size()) - stream_was);
    step.static_cache = kinds.front() == CaptureLayerKind::Static;
    step.landed_row = kinds.front() == CaptureLayerKind::Append ? static_cast<int64_t>(before.front().size())
                                                                 : staticLimit(call, false);
    const Phase phase = call.role == CaptureRole::Drafter ? Phase::Draft
                        : call.index == 0                ? Phase::Prefill
                                                         : Phase::Verify;
    step.uncached = !call.after.has_value();
    step.manifest_call = call_index_;
    std::vector<std::pair<int64_t, int64_t>> unattributed;
    const auto rows = rowsByInput(call, before, after, kinds, unattributed);
    std::vector<RowIdentity> identities;
    std::vector<std::vector<int64_t>> written_rows;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (std::all_of(rows[i].begin(), rows[i].end(), [](int64_t r) { return r < 0; })) {
        if (!step.uncached && kinds.front() == CaptureLayerKind::Append) step.unwritten.push_back(static_cast<int64_t>(i));
        continue;
      }
      identities.push_back({call.input_ids[i], step.true_start + static_cast<int64_t>(i), call.positions[i]});
      written_rows.push_back(rows[i]);
    }
    for (const auto& [layer, row] : unattributed) {
      identities.push_back({-1, kUnknownPosition, kUnknownPosition});
      written_rows.emplace_back(static_cast<size_t>(s.layers), -1);
      written_rows.back()[static_cast<size_t>(layer)] = row;
    }
    CacheEvent e;
    e.kind = CacheEventKind::Append;
    e.phase = phase;
    if (!identities.empty()) {
      const int64_t first = birth(call.role, identities, written_rows, round, phase);
      for (int64_t i = 0; i < static_cast<int64_t>(identities.size()); ++i) e.written.push_back(first + i);
    }
    if (call.attention_mask) {
      const int64_t empty = out_.empty_entry[static_cast<int>(call.role)];
      for (int64_t row : after.front()) step.mask_slots.push_back(row < 0 ? empty : s.entry_of_row.front()[static_cast<size_t>(row)]);
    }
    auto layout = checkedLayout(call.role, after, kinds, staticLimit(call, true));
    // Without a returned cache nothing must be held: the inputs are checked on their own.
    const int64_t end = step.uncached ? 0 : step.true_start + step.inputs;
    setContract(e, call.role, kinds, end, static_cast<int64_t>(after.front().size()), layout, false);
    record(step, std::move(e), std::move(layout));
  }

  void addCall(const CaptureCall& call, int64_t targets_seen) {
    RoleState& s = state(call.role);
    const int64_t round = targets_seen;
    const bool target = call.role == CaptureRole::Target;
    const int64_t stream_index = target ? round : drafterStream(round);
    const TargetPlacement placement = target ? placements_[static_cast<size_t>(targets_seen)] : TargetPlacement{};
    const Slots before = slotsOf(call.before, s.layers);
    const auto before_kinds = kindsOf(call.before, s.layers, s.kinds);
    adoptUnknownRows(call.role, before, round);
    const bool held_something = std::any_of(before.begin(), before.end(), [](const auto& l) { return heldRows(l) > 0; });
    if (call.index > 0 || held_something) addBetween(call, before, before_kinds, round, stream_index, placement.required);
    const Slots after = slotsOf(call.after, s.layers);
    const auto after_kinds = kindsOf(call.after, s.layers, before_kinds);
    addForward(call, before, after, after_kinds, round, stream_index, placement.start);
    s.returned = after;
    s.kinds = after_kinds;
  }

  // The drafter's own stream of `round` (made on its first call of the
  // round): what the target decided before it, C[0:F + 1] (C after the last
  // target call); its drafts join as it feeds them.
  int64_t drafterStream(int64_t round) {
    const auto it = drafter_stream_.find(round);
    if (it != drafter_stream_.end()) return it->second;
    const std::vector<int64_t>& committed = out_.record.sequence;
    const auto target_calls = static_cast<int64_t>(placements_.size());
    const int64_t known = round < target_calls ? std::min<int64_t>(out_.frontiers[static_cast<size_t>(round)] + 1,
                                                                   static_cast<int64_t>(committed.size()))
                                               : static_cast<int64_t>(committed.size());
    addStreamTokens(known);
    out_.streams.emplace_back(committed.begin(), committed.begin() + known);
    const auto index = static_cast<int64_t>(out_.streams.size()) - 1;
    drafter_stream_.emplace(round, index);
    return index;
  }

  // Every stream's tokens, held against the same bound as the round streams.
  void addStreamTokens(int64_t added) {
    stream_tokens_ += added;
    if (stream_tokens_ > kMaxStreamTokens) {
      throw Error(file_.path() + ": too large to check: its token streams exceed " + std::to_string(kMaxStreamTokens) +
                  " tokens");
    }
  }

  const CaptureFile& file_;
  const CaptureManifest& manifest_;
  CaptureTimeline out_;
  std::map<int64_t, int64_t> drafter_stream_;  // round -> index of the drafter's own stream
  int64_t stream_tokens_ = 0;                  // tokens of every stream so far
  RoleState roles_[kCaptureRoles];
  std::vector<TargetPlacement> placements_;  // per target call, where its inputs belong
  size_t call_index_ = 0;        // the manifest call being added
  int64_t ledger_floats_ = 0;    // K and V floats the ledger holds so far
  std::vector<bool> sliding_[kCaptureRoles];  // per layer, from the config (empty: every layer when windowed)
  std::vector<bool> recurrent_[kCaptureRoles];  // per layer: keeps recurrent states, no rows (version 3)
};

}  // namespace

const char* captureOperationName(CaptureOperation operation) {
  return operation == CaptureOperation::Forward ? "forward" : "between";
}

CacheRole cacheRoleOf(CaptureRole role) { return role == CaptureRole::Target ? CacheRole::Target : CacheRole::Drafter; }

void requireOneSequence(const CaptureFile& file) {
  const CaptureManifest& manifest = file.manifest();
  if (manifest.batch > 1) {
    throw Error(file.path() + ": a batch of " + std::to_string(manifest.batch) +
                " sequences is replayed one sequence at a time (CaptureFile::sequence)");
  }
  if (manifest.version != 1) {
    throw Error(file.path() + ": a format version " + std::to_string(manifest.version) +
                " capture is replayed through its sequence view (CaptureFile::sequence)");
  }
}

CaptureTimeline buildCaptureTimeline(const CaptureFile& file) {
  requireOneSequence(file);
  return TimelineBuilder(file).build();
}

}  // namespace kvscope
