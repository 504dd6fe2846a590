// Every cross-reference of a trace, checked once at read time. The order
// matters: each step may rely on what the earlier ones established (layer
// counts before ledger rows, ledger before events, rounds before verify).
#include "core/trace/trace_validator.h"

#include <algorithm>

#include <torch/types.h>

#include "core/error.h"

namespace kvscope {

namespace {

constexpr int64_t kMaxGamma = int64_t{1} << 16;

std::string str(int64_t v) { return std::to_string(v); }

std::string shapeOf(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + str(t.size(d));
  return out + "]";
}

class TraceValidator {
 public:
  // `record`: one of the trace's sequences; `where` names it in a batch ("sequence 2: ").
  TraceValidator(const TraceData& trace, const SessionRecord& record, const std::string& path, std::string where)
      : trace_(trace), t_(record), path_(path), where_(std::move(where)) {}

  void run() {
    checkHeader();
    checkRounds();
    checkVerify();  // before the ids: the logits give the vocabulary size
    checkTokenIds();
    checkLedger();
    checkEvents();
    checkInfo();
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail(path_, "corrupted trace: " + where_ + what); }

  void inRange(int64_t value, int64_t min, int64_t max, const std::string& what) const {
    if (value < min || value > max)
      bad(what + " is " + str(value) + ", outside [" + str(min) + ", " + str(max) + "]");
  }

  int64_t rounds() const { return static_cast<int64_t>(t_.rounds.size()); }
  int64_t sequenceLength() const { return static_cast<int64_t>(t_.sequence.size()); }

  void checkHeader() {
    inRange(t_.target_layers, 1, kMaxTraceLayers, "record.target_layers");
    inRange(t_.drafter_layers, 0, kMaxTraceLayers, "record.drafter_layers");
    if (t_.origins.size() != t_.sequence.size())
      bad(str(static_cast<int64_t>(t_.origins.size())) + " origins for a sequence of " + str(sequenceLength()) +
          " tokens");
    inRange(t_.prompt_length, 0, sequenceLength(), "prompt_length (the sequence holds " + str(sequenceLength()) + ")");
  }

  // rounds[i] is round i (0: the prefill); together they emit the sequence.
  void checkRounds() {
    int64_t length = t_.prompt_length;
    int64_t previous_start = 0;
    for (int64_t i = 0; i < rounds(); ++i) {
      const RoundRecord& r = t_.rounds[static_cast<size_t>(i)];
      const std::string where = "round " + str(i);
      if (r.index != i) bad("rounds[" + str(i) + "] says it is round " + str(r.index));
      inRange(r.gamma, 0, kMaxGamma, where + " gamma");
      inRange(r.start_length, previous_start, sequenceLength(), where + " start_length");
      previous_start = r.start_length;
      const auto drafts = static_cast<int64_t>(r.drafts.size());
      inRange(r.accepted, 0, drafts, where + " accepted count");
      for (const auto& [name, size] : {std::pair<const char*, size_t>{"q", r.q_draft.size()},
                                       {"p", r.p_draft.size()}, {"uniforms", r.uniforms.size()}}) {
        inRange(static_cast<int64_t>(size), 0, drafts, where + " " + name + " values (one per draft)");
      }
      length += static_cast<int64_t>(r.emitted.size());
    }
    if (length != sequenceLength())
      bad("the prompt (" + str(t_.prompt_length) + " tokens) and the rounds' emitted tokens make " + str(length) +
          " tokens, but the sequence holds " + str(sequenceLength()));
  }

  void checkVerify() {
    for (const auto& [round, v] : t_.verify) {
      const std::string where = "verify of round " + str(round);
      if (round < 1 || round >= rounds())
        bad("verify record for round " + str(round) + ", but the trace has rounds 0 to " + str(rounds() - 1));
      inRange(v.first_query_position, 0, sequenceLength() + kMaxGamma, where + " first_query_position");
      if (v.attention.size() > static_cast<size_t>(t_.target_layers) ||
          v.masks.size() > static_cast<size_t>(t_.target_layers))
        bad(where + " has " + str(static_cast<int64_t>(std::max(v.attention.size(), v.masks.size()))) +
            " layers of attention or masks, but the target has " + str(t_.target_layers));
      if (!v.attention.empty() && !v.masks.empty() && v.attention.size() != v.masks.size())
        bad(where + " has " + str(static_cast<int64_t>(v.attention.size())) + " attention layers but " +
            str(static_cast<int64_t>(v.masks.size())) + " mask layers");
      checkVerifyShapes(v, where);
    }
  }

  // Attention [heads, queries, keys_l]: heads and queries agree across layers
  // (keys may differ under a fault); masks [queries, keys_l]; logits [queries, vocab].
  void checkVerifyShapes(const VerifyRecord& v, const std::string& where) {
    int64_t heads = -1, queries = -1;
    auto agree = [&](int64_t& known, int64_t value, const std::string& what) {
      if (known >= 0 && known != value) bad(where + ": " + what + " " + str(value) + " disagrees with " + str(known));
      known = value;
    };
    for (size_t l = 0; l < v.attention.size(); ++l) {
      const at::Tensor& a = v.attention[l];
      const std::string name = "attention layer " + str(static_cast<int64_t>(l));
      floatTensor(a, 3, where + " " + name);
      if (a.size(0) < 1 || a.size(1) < 1) bad(where + " " + name + " has shape " + shapeOf(a));
      agree(heads, a.size(0), name + " heads");
      agree(queries, a.size(1), name + " queries");
    }
    for (size_t l = 0; l < v.masks.size(); ++l) {
      const at::Tensor& m = v.masks[l];
      const std::string name = "mask layer " + str(static_cast<int64_t>(l));
      if (!m.defined() || m.dim() != 2) bad(where + " " + name + " is not a [queries, keys] matrix");
      agree(queries, m.size(0), name + " queries");
      if (l < v.attention.size() && m.size(1) != v.attention[l].size(2))
        bad(where + " " + name + " covers " + str(m.size(1)) + " keys but the attention of that layer " +
            str(v.attention[l].size(2)));
    }
    if (v.logits.defined()) {
      floatTensor(v.logits, 2, where + " logits");
      agree(queries, v.logits.size(0), "logits rows");
      if (v.logits.size(1) < 1) bad(where + " logits have no vocabulary");
      int64_t vocab = vocab_;
      agree(vocab, v.logits.size(1), "logits vocabulary size");
      vocab_ = vocab;
    }
  }

  void floatTensor(const at::Tensor& t, int64_t dims, const std::string& what) const {
    if (!t.defined() || t.dim() != dims) bad(what + " has shape " + (t.defined() ? shapeOf(t) : "none") +
                                             ", not " + str(dims) + " dimensions");
    if (t.scalar_type() != torch::kFloat32) bad(what + " is not a float tensor");
  }

  // Every id indexes a vocabulary somewhere (token strip, logits, tables).
  void checkTokenIds() {
    const int64_t limit = vocab_ > 0 ? vocab_ : kMaxTraceTokenId;
    const std::string bound = vocab_ > 0 ? " (the size of the logits)" : " (the limit for a trace)";
    auto id = [&](int64_t value, const std::string& what) {
      if (value < 0 || value >= limit)
        bad(what + " " + str(value) + " is outside the vocabulary [0, " + str(limit) + ")" + bound);
    };
    for (size_t i = 0; i < t_.sequence.size(); ++i) id(t_.sequence[i], "token " + str(static_cast<int64_t>(i)) + " of the sequence");
    for (const RoundRecord& r : t_.rounds) {
      for (int64_t d : r.drafts) id(d, "a draft of round " + str(r.index));
      for (int64_t e : r.emitted) id(e, "a token emitted in round " + str(r.index));
      if (r.next_token != -1) id(r.next_token, "the next token of round " + str(r.index));
    }
    for (const LedgerEntry& e : t_.ledger.entries()) id(e.token, "a ledger entry's token");
    for (const auto& entry : trace_.token_text) id(entry.first, "a token_text id");
  }

  int64_t entriesOf(CacheRole cache) const {
    return std::count_if(t_.ledger.entries().begin(), t_.ledger.entries().end(),
                         [&](const LedgerEntry& e) { return e.cache == cache; });
  }

  // Entries live within the recorded rounds, their K/V rows have the layer
  // count of their model, and all rows of one cache have one shape.
  void checkLedger() {
    const int64_t position_limit = sequenceLength() + t_.ledger.size() + kMaxGamma;
    std::vector<int64_t> shape[2];
    for (int64_t i = 0; i < t_.ledger.size(); ++i) {
      const LedgerEntry& e = t_.ledger.entry(i);
      const std::string where = "ledger entry " + str(i);
      if (t_.layers(e.cache) == 0) bad(where + " belongs to the " + cacheRoleName(e.cache) + " cache, which has no layers");
      inRange(e.born_round, 0, rounds() - 1, where + " born_round");
      if (e.died_round != -1) inRange(e.died_round, e.born_round, rounds() - 1, where + " died_round");
      if (e.padding) {  // a padded batch's pad row holds no position (docs/batching.md)
        if (e.position != -1) bad(where + " is a pad row, whose position must be -1, not " + str(e.position));
      } else {
        inRange(e.position, 0, position_limit, where + " position");
      }
      inRange(e.rope_position, 0, position_limit, where + " rope_position");
      inRange(e.row, 0, t_.ledger.rowCount() - 1, where + " K/V row");
      const at::Tensor k = t_.ledger.keys(e.row);
      floatTensor(k, 3, where + " K/V rows");
      std::vector<int64_t>& known = shape[e.cache == CacheRole::Target ? 0 : 1];
      if (known.empty()) known = k.sizes().vec();
      kv_heads_[e.cache == CacheRole::Target ? 0 : 1] = k.size(1);
      if (k.sizes().vec() != known || t_.ledger.values(e.row).sizes() != k.sizes())
        bad(where + " K/V rows have shape " + shapeOf(k) + ", unlike the other rows of its cache");
      if (k.size(0) != t_.layers(e.cache))
        bad(where + " K/V rows hold " + str(k.size(0)) + " layers but the " + cacheRoleName(e.cache) + " model has " +
            str(t_.layers(e.cache)));
    }
  }

  // Events come in time order, name existing entries of their own cache, and
  // replayed one by one they give the row counts they claim.
  void checkEvents() {
    const int64_t entries[2] = {entriesOf(CacheRole::Target), entriesOf(CacheRole::Drafter)};
    CacheLayout layouts[2];
    for (CacheRole role : {CacheRole::Target, CacheRole::Drafter})
      layouts[role == CacheRole::Target ? 0 : 1].layers.resize(static_cast<size_t>(t_.layers(role)));
    const auto& events = t_.events.events();
    for (size_t i = 0; i < events.size(); ++i) {
      const CacheEvent& e = events[i];
      const int c = e.cache == CacheRole::Target ? 0 : 1;
      const std::string where = "cache event " + str(static_cast<int64_t>(i));
      inRange(e.round, 0, rounds() - 1, where + " round");
      if (i > 0 && !atOrBefore(events[i - 1].moment(), e.moment())) bad(where + " is out of time order");
      const int64_t layers = t_.layers(e.cache);
      if (static_cast<int64_t>(e.rows_before.size()) != layers || static_cast<int64_t>(e.rows_after.size()) != layers)
        bad(where + " gives rows for " + str(static_cast<int64_t>(e.rows_after.size())) + " layers, but the " +
            cacheRoleName(e.cache) + " model has " + str(layers));
      inRange(e.expected_rows, 0, entries[c] + sequenceLength(), where + " expected_rows");
      if (!e.expected_first.empty() && static_cast<int64_t>(e.expected_first.size()) != layers)
        bad(where + " gives expected first positions for " + str(static_cast<int64_t>(e.expected_first.size())) +
            " layers, but the " + cacheRoleName(e.cache) + " model has " + str(layers));
      for (int64_t first : e.expected_first) inRange(first, 0, e.expected_rows, where + " expected_first");
      for (int64_t layer : e.layers) inRange(layer, 0, layers - 1, where + " touched layer");
      for (const auto* list : {&e.written, &e.removed}) {
        for (int64_t entry : *list) {
          inRange(entry, 0, t_.ledger.size() - 1, where + " ledger entry");
          if (t_.ledger.entry(entry).cache != e.cache)
            bad(where + " on the " + cacheRoleName(e.cache) + " cache names ledger entry " + str(entry) + " of the other cache");
        }
      }
      checkMasked(layouts[c], e, where);
      replay(layouts[c], e, where);
    }
  }

  // A policy's Evict masks rows the layer holds, in kv heads the model has;
  // it moves none (replay checks the row counts).
  void checkMasked(const CacheLayout& layout, const CacheEvent& e, const std::string& where) const {
    if (!e.policy.empty() && e.kind != CacheEventKind::Evict)
      bad(where + " names eviction policy '" + e.policy + "' but is a " + cacheEventKindName(e.kind));
    const int64_t kv_heads = kv_heads_[e.cache == CacheRole::Target ? 0 : 1];
    for (size_t i = 0; i < e.masked.size(); ++i) {
      const MaskedRow& m = e.masked[i];
      const std::string what = where + " masked row " + str(static_cast<int64_t>(i));
      inRange(m.layer, 0, static_cast<int64_t>(layout.layers.size()) - 1, what + " layer");
      inRange(m.kv_head, 0, kv_heads - 1, what + " kv head");
      inRange(m.entry, 0, t_.ledger.size() - 1, what + " ledger entry");
      const auto& rows = layout.layers[static_cast<size_t>(m.layer)];
      if (std::find(rows.begin(), rows.end(), m.entry) == rows.end())
        bad(what + " masks ledger entry " + str(m.entry) + " in layer " + str(m.layer) + ", which that layer does not hold");
    }
  }

  void replay(CacheLayout& layout, const CacheEvent& e, const std::string& where) const {
    for (size_t l = 0; l < layout.layers.size(); ++l) {
      const auto rows = static_cast<int64_t>(layout.layers[l].size());
      if (rows != e.rows_before[l])
        bad(where + " says layer " + str(static_cast<int64_t>(l)) + " held " + str(e.rows_before[l]) +
            " rows before it, but the events before it leave " + str(rows));
      applyEventToLayer(layout.layers[l], e, static_cast<int64_t>(l));
      const auto after = static_cast<int64_t>(layout.layers[l].size());
      if (after != e.rows_after[l])
        bad(where + " says layer " + str(static_cast<int64_t>(l)) + " holds " + str(e.rows_after[l]) +
            " rows after it, but replaying it gives " + str(after));
    }
  }

  // The parts of the free-form info that the readers index or cast by.
  void checkInfo() {
    const nlohmann::json& info = trace_.info;
    if (!info.is_object() && !info.is_null()) bad("info is not a JSON object");
    if (!info.is_object() || !info.contains("state")) return;
    const nlohmann::json& state = info.at("state");
    if (!state.is_object()) bad("info.state is not a JSON object");
    auto integer = [&](const char* key, int64_t min, int64_t max) {
      if (!state.contains(key)) return;
      const nlohmann::json& v = state.at(key);
      if (!v.is_number_integer()) bad(std::string("info.state.") + key + " is not an integer");
      inRange(v.get<int64_t>(), min, max, std::string("info.state.") + key);
    };
    integer("current_round", 0, rounds());
    integer("next_phase", static_cast<int>(Phase::Prefill), static_cast<int>(Phase::Prune));
    integer("current_gamma", 0, kMaxGamma);
  }

  const TraceData& trace_;
  const SessionRecord& t_;
  const std::string& path_;
  std::string where_;
  int64_t vocab_ = -1;  // from the logits, when the trace has any
  int64_t kv_heads_[2] = {0, 0};  // per cache, from its ledger rows [layers, kv_heads, head_dim]
};

}  // namespace

void validateTrace(const TraceData& trace, const std::string& path) {
  TraceValidator(trace, trace.record, path, "").run();
  for (int64_t i = 1; i < trace.sequences(); ++i) {
    TraceValidator(trace, trace.sequence(i), path, "sequence " + std::to_string(i) + ": ").run();
  }
}

}  // namespace kvscope
