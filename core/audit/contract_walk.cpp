#include "core/audit/contract_walk.h"

#include <algorithm>
#include <sstream>

#include "core/audit/row_identity.h"

namespace kvscope {
namespace {

// Rows without the wrong ones the next mask hides.
std::vector<int64_t> withoutHidden(const std::vector<int64_t>& rows, const std::vector<RowVerdict>& broken,
                                   const std::unordered_set<int64_t>& hidden) {
  std::unordered_set<int64_t> excused;
  for (const RowVerdict& v : broken) {
    if (v.entry >= 0 && hidden.count(v.entry) > 0) excused.insert(v.entry);
  }
  std::vector<int64_t> kept;
  for (int64_t e : rows) {
    if (excused.count(e) == 0) kept.push_back(e);
  }
  return kept;
}

class Walk {
 public:
  Walk(const SessionRecord& record, ContractRules& rules) : record_(record), rules_(rules) {
    layouts_[0].layers.resize(static_cast<size_t>(record.target_layers));
    layouts_[1].layers.resize(static_cast<size_t>(record.drafter_layers));
  }

  std::optional<RootCause> run() {
    const auto& events = record_.events.events();
    for (size_t i = 0; i < events.size(); ++i) {
      const CacheEvent& e = events[i];
      CacheLayout& layout = layouts_[e.cache == CacheRole::Target ? 0 : 1];
      applyEvent(layout, e);
      if (auto cause = checkEvent(e, i, layout)) return cause;
    }
    return std::nullopt;
  }

 private:
  std::optional<RootCause> checkEvent(const CacheEvent& e, size_t i, const CacheLayout& layout) {
    std::optional<RootCause> cause = rowsBreach(e, i, layout);
    if (!cause) cause = paddingBreach(e, i, layout);
    if (!cause) cause = storeBreach(e, i);
    if (!cause) cause = blockBreach(e, i);
    if (!cause) cause = overwriteBreach(e, i);
    if (cause) {
      rules_.describe(*cause);
      return cause;
    }
    if (e.kind != CacheEventKind::Append && e.kind != CacheEventKind::Refeed) return std::nullopt;
    if (auto breach = rules_.forwardBreach(i)) return breach;
    return rules_.valueBreach(i);
  }

  // Wrong row counts or identities in any layer after event i.
  std::optional<RootCause> rowsBreach(const CacheEvent& e, size_t i, const CacheLayout& layout) {
    const std::vector<int64_t> stream = rules_.streamOf(i);
    const auto& entries = record_.ledger.entries();
    std::optional<std::unordered_set<int64_t>> hidden;  // asked once, when a layer has wrong rows
    std::optional<RootCause> cause;
    for (size_t l = 0; l < layout.layers.size(); ++l) {
      const auto layer = static_cast<int64_t>(l);
      std::vector<int64_t> rows = layout.layers[l];
      std::vector<RowVerdict> broken = brokenRows(entries, e.cache, layer, rows, e.contract(layer), stream);
      if (!broken.empty()) {
        if (!hidden) hidden = rules_.hiddenRows(i);
        if (!hidden->empty()) {
          rows = withoutHidden(rows, broken, *hidden);
          if (rows.size() != layout.layers[l].size()) broken = brokenRows(entries, e.cache, layer, rows, e.contract(layer), stream);
        }
      }
      // A left-padded layer's pad rows hold no position: the contract counts the others.
      const auto held = static_cast<int64_t>(std::count_if(rows.begin(), rows.end(), [&](int64_t entry) {
        return !entries[static_cast<size_t>(entry)].padding;
      }));
      if (broken.empty() && held == e.contract(layer).rows()) continue;
      if (!cause) {
        cause = causeAtEvent(e, i);
        cause->expected_rows = e.contract(layer).rows();
        cause->actual_rows = held;
        // brokenRows sorts by row: a repeat is the last one kept (a search of
        // every row kept was quadratic in a layer of 2^18 empty slots).
        for (const RowVerdict& v : broken) {
          if (cause->rows.empty() || cause->rows.back() != v.row) cause->rows.push_back(v.row);
        }
        cause->verdicts = std::move(broken);
      }
      cause->layers.push_back(layer);
    }
    return cause;
  }

  // A forward that attended a pad row: a left-padded sequence's pad rows are
  // no part of its text, and every forward's mask must hide them
  // (CacheEvent::hidden_padding lists the pad rows it hid).
  std::optional<RootCause> paddingBreach(const CacheEvent& e, size_t i, const CacheLayout& layout) const {
    if ((e.kind != CacheEventKind::Append && e.kind != CacheEventKind::Refeed) || layout.layers.empty()) return std::nullopt;
    const auto& entries = record_.ledger.entries();
    const std::unordered_set<int64_t> hidden(e.hidden_padding.begin(), e.hidden_padding.end());
    std::vector<int64_t> attended;  // rows of layer 0 (pad rows sit alike in every layer)
    const std::vector<int64_t>& rows = layout.layers.front();
    for (size_t r = 0; r < rows.size(); ++r) {
      if (entries[static_cast<size_t>(rows[r])].padding && hidden.count(rows[r]) == 0) attended.push_back(static_cast<int64_t>(r));
    }
    if (attended.empty()) return std::nullopt;
    RootCause cause = everyLayerCause(e, i, "padding");
    cause.rows = std::move(attended);
    return cause;
  }

  // Stored K/V that are not what the forward computed (a session's storage).
  static std::optional<RootCause> storeBreach(const CacheEvent& e, size_t i) {
    if (e.max_store_error <= 0) return std::nullopt;
    RootCause cause = everyLayerCause(e, i, "store");
    const int64_t first = e.rows_before.empty() ? 0 : e.rows_before.front();
    for (size_t r = 0; r < e.written.size(); ++r) cause.rows.push_back(first + static_cast<int64_t>(r));
    std::ostringstream action;
    action << "stored K/V differ from the computed values by up to " << e.max_store_error;
    cause.fault_action = cause.fault_action.empty() ? action.str() : cause.fault_action + "; " + action.str();
    return cause;
  }

  // A breach of the storage, not of one layer's rows: every layer named.
  static RootCause everyLayerCause(const CacheEvent& e, size_t i, const char* kind) {
    RootCause cause = causeAtEvent(e, i);
    cause.kind = kind;
    cause.actual_rows = e.rows_after.empty() ? 0 : e.rows_after.front();
    for (int64_t l = 0; l < static_cast<int64_t>(e.rows_after.size()); ++l) cause.layers.push_back(l);
    return cause;
  }

  // A paged cache's table mapping blocks its sequence does not own: whatever
  // another sequence writes there next becomes this one's rows.
  static std::optional<RootCause> blockBreach(const CacheEvent& e, size_t i) {
    if (e.dangling_blocks.empty()) return std::nullopt;
    RootCause cause = everyLayerCause(e, i, "block");
    for (const DanglingBlock& d : e.dangling_blocks) {
      for (int64_t r = d.first_row; r < d.first_row + d.rows; ++r) cause.rows.push_back(r);
    }
    cause.dangling_blocks = e.dangling_blocks;
    return cause;
  }

  // Rows of a paged cache another sequence wrote over: this sequence's books
  // are right, the pool's block was not its alone.
  static std::optional<RootCause> overwriteBreach(const CacheEvent& e, size_t i) {
    if (e.overwritten_rows.empty()) return std::nullopt;
    RootCause cause = everyLayerCause(e, i, "overwritten");
    cause.rows = e.overwritten_rows;
    cause.overwritten_by = e.overwritten_by;
    return cause;
  }

  const SessionRecord& record_;
  ContractRules& rules_;
  CacheLayout layouts_[2];
};

}  // namespace

RootCause causeAtEvent(const CacheEvent& event, size_t index) {
  RootCause c;
  c.event_index = static_cast<int64_t>(index);
  c.cache = event.cache;
  c.round = event.round;
  c.phase = event.phase;
  c.operation = event.kind;
  c.expected_rows = event.expected_rows;
  c.fault_action = event.fault_action;
  return c;
}

std::optional<RootCause> walkContract(const SessionRecord& record, ContractRules& rules) {
  return Walk(record, rules).run();
}

}  // namespace kvscope
