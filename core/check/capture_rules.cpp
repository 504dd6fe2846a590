#include "core/check/capture_rules.h"

#include <torch/types.h>

#include <algorithm>
#include <sstream>

#include "core/audit/kv_tolerance.h"
#include "core/capture/capture_recurrent.h"  // version 3: recurrent states
#include "core/check/freed_block_rule.h"
#include "core/check/recurrent_rule.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope {
namespace {

std::string span(int64_t first, int64_t count) {
  return count == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(first + count - 1);
}

void addLayer(RootCause& c, int64_t layer) {
  if (std::find(c.layers.begin(), c.layers.end(), layer) == c.layers.end()) c.layers.push_back(layer);
}

}  // namespace

CaptureRules::CaptureRules(const CaptureFile& file, const CaptureTimeline& timeline, const CaptureRecordView& view,
                           CaptureReferences& references, const TokenText& text)
    : file_(file), timeline_(timeline), view_(view), references_(references), text_(text) {
  for (int r = 0; r < kCaptureRoles; ++r) {
    if (file.manifest().models[r]) {
      tolerance_[static_cast<size_t>(r)] = kvTolerance(file.rows(static_cast<CaptureRole>(r), 0, CaptureKV::Keys).dtype());
    }
  }
}

std::vector<int64_t> CaptureRules::streamOf(size_t index) const {
  return timeline_.streams[static_cast<size_t>(stepOf(index).stream)];
}

RootCause CaptureRules::causeAt(size_t index) const {
  RootCause c = causeAtEvent(eventOf(index), index);
  c.call = stepOf(index).call;
  return c;
}

at::Tensor CaptureRules::heldHeads(CaptureRole role, const at::Tensor& reference) const {
  const auto& shard = file_.manifest().shard;
  if (!shard) return reference;
  const auto r = static_cast<size_t>(role);
  return reference.narrow(0, shard->kv_head_first[r], shard->kv_head_count[r]);  // a rank's heads only
}

bool CaptureRules::isEmpty(const CaptureStep& step, int64_t entry) const {
  return entry == timeline_.empty_entry[static_cast<int>(step.role)];
}

bool CaptureRules::isRing(const CaptureCall& call, int64_t layer) const {
  return call.after && call.after->layers[static_cast<size_t>(layer)].kind == CaptureLayerKind::Ring;
}

// --- rows the next mask hides -------------------------------------------------

CaptureRules::NextMask CaptureRules::nextMask(size_t from) const {
  size_t j = from;
  const CaptureRole role = timeline_.steps[from].role;
  while (j < timeline_.steps.size() &&
         (timeline_.steps[j].role != role || timeline_.steps[j].operation != CaptureOperation::Forward)) {
    ++j;
  }
  NextMask next;
  if (j == timeline_.steps.size()) return next;
  const CaptureStep& step = timeline_.steps[j];
  const CaptureCall& call = callOf(step);
  if (!call.attention_mask || step.mask_slots.empty() || isRing(call, 0)) return next;
  next.call = step.call;
  next.explicit_mask = call.attention_mask->kind == CaptureMaskKind::Explicit;
  const CaptureTensor t = file_.tensor(call.attention_mask->tensor);  // BOOL [n or 1, K]
  const bool padding = call.attention_mask->kind == CaptureMaskKind::Padding;
  const int64_t keys = std::min<int64_t>(t.shape()[1], static_cast<int64_t>(step.mask_slots.size()));
  const int64_t queries = padding ? 1 : std::min<int64_t>(t.shape()[0], step.inputs);
  for (int64_t k = 0; k < keys; ++k) {
    bool seen = false;
    for (int64_t q = 0; q < queries && !seen; ++q) seen = t.data[static_cast<size_t>(q * t.shape()[1] + k)] != 0;
    if (!seen) next.hidden.insert(step.mask_slots[static_cast<size_t>(k)]);
  }
  return next;
}

std::unordered_set<int64_t> CaptureRules::hiddenRows(size_t index) const {
  return nextMask(view_.step_of_event.at(index)).hidden;
}

// --- a forward's own checks ---------------------------------------------------

std::optional<RootCause> CaptureRules::forwardBreach(size_t index) {
  const CaptureStep& step = stepOf(index);
  if (step.uncached && step.true_start > 0) return lostCache(index);
  if (auto state = recurrentState(index)) return state;  // version 3: a hybrid model's recurrent state
  return mask(index);
}

// The recurrent state this forward resumed from, when it is not the one after
// the position before its first input over the kept tokens (recurrent_rule.h).
// The state was restored (or not) before the call: the operation is "restore".
std::optional<RootCause> CaptureRules::recurrentState(size_t index) const {
  const CaptureStep& step = stepOf(index);
  const auto breach = recurrentBreach(file_.manifest(), callOf(step));
  if (!breach) return std::nullopt;
  RootCause c = causeAt(index);
  c.kind = "state";
  c.state_operation = "restore";
  c.state_kind = capture_recurrent::stateKindName(breach->kind);
  c.layers = {breach->layer};
  c.expected_rows = c.actual_rows = 0;
  c.what = breach->what;
  return c;
}

std::optional<RootCause> CaptureRules::lostCache(size_t index) const {
  const CaptureStep& step = stepOf(index);
  RootCause c = causeAt(index);
  c.kind = "no_cache";
  c.expected_rows = step.true_start;
  c.actual_rows = 0;
  std::ostringstream out;
  out << captureRoleName(step.role) << " call " << step.call << " got no cache yet fed only " << step.inputs
      << " token" << (step.inputs == 1 ? "" : "s") << ", which belong at positions " << span(step.true_start, step.inputs)
      << ": the " << step.true_start << " rows before them were lost";
  c.what = out.str();
  return c;
}

std::optional<RootCause> CaptureRules::mask(size_t index) const {
  const CaptureStep& step = stepOf(index);
  const CaptureCall& call = callOf(step);
  if (!call.attention_mask || step.mask_slots.empty() || isRing(call, 0)) return std::nullopt;
  const CaptureTensor t = file_.tensor(call.attention_mask->tensor);  // BOOL [n or 1, K]
  const std::vector<int64_t>& stream = timeline_.streams[static_cast<size_t>(step.stream)];
  const auto& ledger = view_.record.ledger;
  const int64_t keys = std::min<int64_t>(t.shape()[1], static_cast<int64_t>(step.mask_slots.size()));
  const bool padding = call.attention_mask->kind == CaptureMaskKind::Padding;
  const int64_t before_slots = keys - (step.static_cache ? 0 : step.inputs);
  for (int64_t k = 0; k < step.inputs; ++k) {
    const int64_t p = step.true_start + k;
    const int64_t c = call.cache_position ? (*call.cache_position)[static_cast<size_t>(k)] : before_slots + k;
    std::vector<int64_t> future, hidden;
    std::unordered_set<int64_t> seen;  // needed positions the input sees
    int64_t empty = 0;
    for (int64_t j = 0; j < keys; ++j) {
      const bool attends = t.data[static_cast<size_t>((padding ? 0 : k) * t.shape()[1] + j)] != 0 && (!padding || j <= c);
      const int64_t e = step.mask_slots[static_cast<size_t>(j)];
      if (isEmpty(step, e)) {
        empty += attends ? 1 : 0;
        continue;
      }
      const LedgerEntry& row = ledger.entry(e);
      const bool needed = row.position >= 0 && row.position <= p && row.position < static_cast<int64_t>(stream.size()) &&
                          stream[static_cast<size_t>(row.position)] == row.token;
      if (attends && row.position > p) future.push_back(row.position);
      if (attends && needed) seen.insert(row.position);
      if (!attends && needed && (!step.static_cache || j <= c)) hidden.push_back(row.position);
    }
    // A position seen through another row is not hidden: an engine that
    // keeps an old row of it (computed in a rejected context) may mask that one.
    hidden.erase(std::remove_if(hidden.begin(), hidden.end(), [&](int64_t h) { return seen.count(h) > 0; }), hidden.end());
    if (future.empty() && hidden.empty() && empty == 0) continue;
    RootCause cause = causeAt(index);
    cause.kind = "mask";
    cause.expected_rows = p + 1;
    cause.actual_rows = p + 1 + static_cast<int64_t>(future.size()) + empty - static_cast<int64_t>(hidden.size());
    for (int64_t l = 0; l < view_.record.layers(cacheRoleOf(step.role)); ++l) cause.layers.push_back(l);
    std::ostringstream out;
    out << captureRoleName(step.role) << " call " << step.call << "'s attention mask ";
    if (!future.empty()) {
      std::sort(future.begin(), future.end());
      out << "lets input " << k << " (position " << p << ") see position" << (future.size() > 1 ? "s " : " ")
          << span(future.front(), static_cast<int64_t>(future.size())) << " after it: no causal mask among its "
          << step.inputs << " inputs";
      cause.rows = future;
    } else if (!hidden.empty()) {
      std::sort(hidden.begin(), hidden.end());
      out << "hides position" << (hidden.size() > 1 ? "s " : " ") << span(hidden.front(), static_cast<int64_t>(hidden.size()))
          << " from input " << k << " (position " << p << "), which must see every position before it";
      cause.rows = hidden;
    } else {
      out << "lets input " << k << " (position " << p << ") see " << empty << " empty (zero) slot" << (empty > 1 ? "s" : "");
    }
    cause.what = out.str();
    return cause;
  }
  return std::nullopt;
}

// --- values against the reference ---------------------------------------------

std::optional<RootCause> CaptureRules::valueBreach(size_t index) {
  const CaptureStep& step = stepOf(index);
  const CacheEvent& e = eventOf(index);
  if (e.written.empty()) return std::nullopt;
  const StreamReference* run = references_.ofStream(step.role, step.stream);
  if (!run) return std::nullopt;
  const AuditTolerance& tol = tolerance_[static_cast<size_t>(step.role)];
  const auto& ledger = view_.record.ledger;
  std::optional<RootCause> cause;
  for (size_t l = 0; l < e.layout.size(); ++l) {
    const auto layer = static_cast<int64_t>(l);
    const auto& rows = e.layout[l];
    for (size_t r = 0; r < rows.size(); ++r) {
      if (std::find(e.written.begin(), e.written.end(), rows[r]) == e.written.end()) continue;
      const LedgerEntry& written = ledger.entry(rows[r]);
      if (written.position < 0 || written.position >= run->length()) continue;
      const auto want_k = heldHeads(step.role, run->key(layer, written.position));  // [kv_heads held, head_dim]
      const auto want_v = heldHeads(step.role, run->value(layer, written.position));
      const auto got_k = ledger.keys(written.row)[layer];
      const auto got_v = ledger.values(written.row)[layer];
      const double dk = (got_k - want_k).abs().max().item<double>();
      const double dv = (got_v - want_v).abs().max().item<double>();
      const double scale = std::max(want_k.abs().max().item<double>(), want_v.abs().max().item<double>());
      ++rows_value_checked_;
      max_value_error_ = std::max({max_value_error_, dk, dv});
      if (withinTolerance(std::max(dk, dv), scale, tol)) continue;
      if (!cause) {
        cause = causeAt(index);
        cause->kind = "values";
        cause->expected_rows = cause->actual_rows = static_cast<int64_t>(rows.size());
      }
      addLayer(*cause, layer);
      if (cause->layers.front() != layer) continue;
      RowVerdict v;
      v.cache = e.cache;
      v.layer = layer;
      v.row = static_cast<int64_t>(r);
      v.entry = rows[r];
      v.token = written.token;
      v.position = written.position;
      v.rope_position = written.rope_position;
      v.state = RowState::WrongValues;
      v.max_abs_dk = dk;
      v.max_abs_dv = dv;
      cause->rows.push_back(v.row);
      cause->verdicts.push_back(v);
    }
  }
  if (cause) {
    const RowVerdict& v = cause->verdicts.front();
    std::ostringstream out;
    out << captureRoleName(step.role) << " call " << step.call << " wrote rows whose K/V differ from the reference forward"
        << layersText(*cause) << ": layer " << v.layer << " row " << v.row << " (" << quoted(v.token) << ", position "
        << v.position << ") max |dK| " << *v.max_abs_dk << ", |dV| " << *v.max_abs_dv;
    if (cause->verdicts.size() > 1) out << " (" << cause->verdicts.size() << " rows wrong)";
    cause->what = out.str();
  }
  return cause;
}

// --- sentences in the engine's terms ------------------------------------------

std::string CaptureRules::quoted(int64_t token) const {
  if (token < 0) return "<unknown>";
  std::string shown = text_ ? visibleText(text_(token)) : std::string();
  return shown.empty() ? "<id " + std::to_string(token) + ">" : "'" + shown + "'";
}

std::string CaptureRules::rowText(const RowVerdict& v, const CaptureStep& step) const {
  const std::vector<int64_t>& committed = view_.record.sequence;
  std::ostringstream out;
  if (v.state == RowState::Missing) {
    out << "position " << v.position << " (" << quoted(v.token) << ") is missing";
    return out.str();
  }
  if (isEmpty(step, v.entry)) {
    out << "row " << v.row << " is an empty (zero) slot";
    return out.str();
  }
  if (v.position < -1) {
    out << "row " << v.row << " holds a row written between calls, not by any input";
    return out.str();
  }
  const bool rejected = v.position >= 0 && v.position < static_cast<int64_t>(committed.size()) &&
                        committed[static_cast<size_t>(v.position)] != v.token;
  out << "row " << v.row << " holds " << (rejected ? "the rejected draft " : "") << quoted(v.token) << " (position "
      << v.position;
  if (v.rope_position != v.position) out << ", rotated for " << v.rope_position;
  out << ")";
  return out.str();
}

std::string CaptureRules::layersText(const RootCause& c) const {
  if (static_cast<int64_t>(c.layers.size()) == view_.record.layers(c.cache)) return "";
  std::ostringstream out;
  out << " in layer" << (c.layers.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < c.layers.size(); ++i) out << (i ? ", " : "") << c.layers[i];
  return out.str();
}

void CaptureRules::describe(RootCause& cause) const {
  const size_t step_index = view_.step_of_event.at(static_cast<size_t>(cause.event_index));
  const CaptureStep& step = timeline_.steps[step_index];
  cause.call = step.call;
  if (step.operation == CaptureOperation::Between) {
    describeBetween(cause, step);
  } else {
    describeForward(cause, step);
  }
  if (!cause.dangling_blocks.empty()) {  // a paged rollback's freed blocks (freed_block_rule.h)
    cause.kind = "block";
    cause.what += freedBlocksText(cause);
  }
  if (cause.verdicts.empty()) return;
  const NextMask next = nextMask(step_index);
  if (!next.explicit_mask) return;
  // An engine that may mask rows instead of removing them: say why these count.
  const size_t others = next.hidden.size();
  cause.what += "; " + std::string(captureRoleName(step.role)) + " call " + std::to_string(next.call) +
                "'s attention mask does not hide them" +
                (others ? " (it hides " + std::to_string(others) + " other row" + (others == 1 ? "" : "s") + ")" : "");
}

void CaptureRules::describeBetween(RootCause& c, const CaptureStep& step) const {
  c.kind = captureBetweenKindName(step.change);
  std::ostringstream out;
  const char* role = captureRoleName(step.role);
  if (step.call > 0) {
    out << "between " << role << " calls " << step.call - 1 << " and " << step.call << " ";
  } else {
    out << "before " << role << " call 0 ";
  }
  switch (step.change) {
    case CaptureBetweenKind::None:
      if (step.static_cache) {
        out << "nothing was cut: the next call writes at cache position " << c.actual_rows << ", so it attends "
            << c.actual_rows << " rows";
      } else {
        out << "nothing was cut: the cache kept its " << c.actual_rows << " rows";
      }
      break;
    case CaptureBetweenKind::Crop: out << "the cache was cut to " << c.actual_rows << " rows"; break;
    case CaptureBetweenKind::Slice: out << "the cache was sliced to " << c.actual_rows << " rows"; break;
    case CaptureBetweenKind::Reset: out << "the cache was reset to " << c.actual_rows << " rows"; break;
    case CaptureBetweenKind::Overwrite: out << "rows were overwritten in place (" << c.actual_rows << " rows)"; break;
    case CaptureBetweenKind::Roll: out << "the rows were moved to other slots (" << c.actual_rows << " rows)"; break;
    case CaptureBetweenKind::Replace: out << "the cache was replaced by one of " << c.actual_rows << " rows"; break;
  }
  out << " where " << c.expected_rows << " were required" << layersText(c);
  if (!c.verdicts.empty()) out << ": " << rowText(c.verdicts.front(), step);
  if (c.verdicts.size() > 1) out << " (" << c.verdicts.size() << " rows wrong)";
  c.what = out.str();
}

// The first input whose token is not the stream's at the position it belongs.
std::optional<int64_t> CaptureRules::wrongToken(const CaptureStep& step) const {
  const CaptureCall& call = callOf(step);
  const std::vector<int64_t>& stream = timeline_.streams[static_cast<size_t>(step.stream)];
  for (int64_t k = 0; k < step.inputs; ++k) {
    const int64_t p = step.true_start + k;
    if (p >= static_cast<int64_t>(stream.size()) || stream[static_cast<size_t>(p)] != call.input_ids[static_cast<size_t>(k)]) {
      return k;
    }
  }
  return std::nullopt;
}

void CaptureRules::describeForward(RootCause& c, const CaptureStep& step) const {
  const CaptureCall& call = callOf(step);
  const std::vector<int64_t>& stream = timeline_.streams[static_cast<size_t>(step.stream)];
  const char* role = captureRoleName(step.role);
  const int64_t n = step.inputs;
  std::ostringstream out;
  out << role << " call " << step.call << " fed " << n << " token" << (n == 1 ? "" : "s") << " at position"
      << (n == 1 ? " " : "s ") << span(step.claimed_start, n);
  if (const auto k = wrongToken(step)) {
    const int64_t p = step.true_start + *k;
    c.kind = "tokens";
    out << ": input " << *k << " is " << quoted(call.input_ids[static_cast<size_t>(*k)]) << " where "
        << (step.role == CaptureRole::Target ? "the committed sequence" : "the round's sequence") << " holds ";
    if (p < static_cast<int64_t>(stream.size())) {
      out << quoted(stream[static_cast<size_t>(p)]) << " at position " << p;
      if (*k == 0 && step.role == CaptureRole::Target) out << " (the token the previous verify chose was never fed)";
    } else {
      out << "nothing at position " << p;
    }
  } else if (step.true_start < step.landed_row) {
    c.kind = "refed_prefix";
    out << " whose tokens repeat positions " << span(step.true_start, n) << ": ";
    out << (step.true_start == 0 ? "the prefix was fed again" : "tokens were fed again") << " with " << step.landed_row
        << " rows already cached";
  } else if (step.true_start > step.landed_row) {
    c.kind = "skipped_position";
    out << " where " << (n == 1 ? "it belongs" : "they belong") << " at " << span(step.true_start, n) << ": position"
        << (step.true_start - step.landed_row == 1 ? " " : "s ") << span(step.landed_row, step.true_start - step.landed_row)
        << " (" << quoted(stream[static_cast<size_t>(step.landed_row)]) << ") never fed, so "
        << (step.true_start - step.landed_row == 1 ? "its" : "their") << " K/V never written";
  } else if (!step.unwritten.empty()) {
    const int64_t k = step.unwritten.front();
    c.kind = "unwritten";
    out << " but wrote no row for input " << k << " (" << quoted(call.input_ids[static_cast<size_t>(k)]) << " at position "
        << step.true_start + k << ")";
    if (step.unwritten.size() > 1) out << " and " << step.unwritten.size() - 1 << " more";
    out << ": its K/V was never stored";
  } else if (step.claimed_start != step.true_start) {
    c.kind = "positions";
    out << " (" << capturePositionsSourceName(call.positions_source) << ") where the " << step.landed_row
        << " rows before them put them at " << span(step.true_start, n) << ": rotated for the wrong positions";
  } else {
    const CacheEvent& e = eventOf(static_cast<size_t>(c.event_index));
    const bool window = std::any_of(c.layers.begin(), c.layers.end(), [&](int64_t l) {
      return e.expectedFirst(l) > 0 || isRing(call, l);
    });
    const bool empty = std::any_of(c.verdicts.begin(), c.verdicts.end(), [&](const RowVerdict& v) { return isEmpty(step, v.entry); });
    c.kind = window ? "window" : empty ? "empty_slot" : "rows";
    out.str("");
    const int64_t layer = c.layers.front();
    out << role << " call " << step.call << " left " << c.actual_rows << " rows where "
        << (window ? "its window needs positions " + span(e.contract(layer).first, e.contract(layer).rows())
                   : std::to_string(c.expected_rows) + " were required")
        << layersText(c);
    if (window && timeline_.window[static_cast<int>(step.role)] > 0) {
      out << " (a ring buffer of " << timeline_.window[static_cast<int>(step.role)] << " slots)";
    }
  }
  if (c.kind == "window" || c.kind == "empty_slot" || c.kind == "rows") {
    if (!c.verdicts.empty()) out << ": " << rowText(c.verdicts.front(), step);
    if (c.verdicts.size() > 1) out << " (" << c.verdicts.size() << " rows wrong)";
  }
  c.what = out.str();
}

}  // namespace kvscope
