#include "core/check/capture_check.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_set>

#include "core/audit/row_identity.h"
#include "core/check/reference_streams.h"
#include "core/error.h"
#include "core/model/scoring.h"
#include "core/model/tokenizer/visible_text.h"

namespace kvscope {
namespace {

std::string quoted(const TokenText& text, int64_t token) {
  if (token < 0) return "<unknown>";
  std::string shown = text ? visibleText(text(token)) : std::string();
  return shown.empty() ? "<id " + std::to_string(token) + ">" : "'" + shown + "'";
}

std::string span(int64_t first, int64_t count) {
  return count == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(first + count - 1);
}

class Checker {
 public:
  Checker(const CaptureFile& file, const CaptureTimeline& timeline, const CaptureCheckOptions& options,
          const TokenText& text)
      : file_(file), timeline_(timeline), options_(options), text_(text) {
    for (int r = 0; r < kCaptureRoles; ++r) {
      if (file.manifest().models[r]) {
        tolerance_[r] = captureTolerance(file.rows(static_cast<CaptureRole>(r), 0, CaptureKV::Keys).dtype());
      }
    }
  }

  CaptureCheckReport run() {
    CaptureCheckReport report;
    for (int r = 0; r < kCaptureRoles; ++r) {
      if (const CaptureModel* m = file_.manifest().model(static_cast<CaptureRole>(r))) report.calls[r] = m->calls;
      if (file_.manifest().models[r] && !options_.models[r]) {
        report.notes.push_back(std::string("no ") + captureRoleName(static_cast<CaptureRole>(r)) +
                               " model: its rows' values and logits were not compared with a reference");
      }
    }
    report.committed_inferred = timeline_.committed_inferred;
    if (timeline_.committed_inferred) {
      report.notes.push_back("the capture has no committed sequence (rec.commit): the target's own inputs stand for it, "
                             "so a target that keeps a wrong row it also believes in is not caught");
    }
    for (size_t i = 0; i < timeline_.steps.size() && !report.root_cause; ++i) report.root_cause = checkStep(i);
    if (report.root_cause) report.root_cause = preferTheTargetsRollback(*report.root_cause);
    report.first_divergence = firstDivergence();
    report.rows_value_checked = rows_value_checked_;
    report.max_value_error = max_value_error_;
    report.logit_rows_checked = logit_rows_checked_;
    return report;
  }

 private:
  const LedgerEntry& entry(int64_t index) const { return timeline_.record.ledger.entry(index); }
  const CaptureCall& callOf(const CaptureStep& step) const { return file_.manifest().calls[step.manifest_call]; }
  bool isEmpty(const CaptureStep& step, int64_t e) const { return e == timeline_.empty_entry[static_cast<int>(step.role)]; }

  std::optional<CaptureBreach> checkStep(size_t i) {
    const CaptureStep& step = timeline_.steps[i];
    if (auto breach = structure(i)) return breach;
    if (step.operation == CaptureOperation::Between) return std::nullopt;
    if (step.uncached && step.true_start > 0) return lostCache(i);
    if (auto breach = mask(i)) return breach;
    return values(i);
  }

  // A drafter's cache found wrong between two of its calls, and the
  // target's found wrong too in a window between calls that overlaps it: the
  // same rollback went wrong in both (the drafter only drafts first). Name
  // the target's, where the rejected drafts were decided.
  CaptureBreach preferTheTargetsRollback(CaptureBreach drafter) {
    if (drafter.role != CaptureRole::Drafter || drafter.operation != CaptureOperation::Between) return drafter;
    std::optional<size_t> last_forward[kCaptureRoles];  // each role's last forward before the drafter's breach
    for (size_t i = 0; i < drafter.step; ++i) {
      if (timeline_.steps[i].operation == CaptureOperation::Forward) last_forward[static_cast<int>(timeline_.steps[i].role)] = i;
    }
    const std::optional<size_t>& last_target_forward = last_forward[static_cast<int>(CaptureRole::Target)];
    const std::optional<size_t>& drafter_previous = last_forward[static_cast<int>(CaptureRole::Drafter)];
    for (size_t j = drafter.step + 1; j < timeline_.steps.size(); ++j) {
      const CaptureStep& step = timeline_.steps[j];
      if (step.role != CaptureRole::Target) continue;
      // The target's window opened (its last forward) after the drafter's did and before it closed.
      const bool overlaps = last_target_forward && (!drafter_previous || *last_target_forward > *drafter_previous);
      if (step.operation == CaptureOperation::Between && overlaps) {
        if (auto target = structure(j)) return *target;
      }
      break;
    }
    return drafter;
  }

  // --- structure: row_identity's verdicts on the event's rows ---------------

  // The rows the attention mask of the forward that reads the cache after
  // step i (step i itself, or the role's next forward) hides from every
  // input: an engine may keep rejected rows and mask them instead of
  // removing them (tree attention does). Only rows the contract does not
  // need may be excused this way; the mask check names a needed one hidden.
  struct NextMask {
    std::unordered_set<int64_t> hidden;  // entries no input sees
    int64_t call = -1;                   // the forward whose mask it is
    bool explicit_mask = false;          // a mask of the engine's own (not padding)
  };
  NextMask hiddenByTheNextMask(size_t i) const {
    size_t j = i;
    while (j < timeline_.steps.size() &&
           (timeline_.steps[j].role != timeline_.steps[i].role || timeline_.steps[j].operation != CaptureOperation::Forward)) {
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

  // Layer rows without the broken ones the next mask hides.
  std::vector<int64_t> withoutMasked(const std::vector<int64_t>& rows, const std::vector<RowVerdict>& broken,
                                     const std::unordered_set<int64_t>& hidden) const {
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

  std::optional<CaptureBreach> structure(size_t i) {
    const CacheEvent& e = timeline_.event(i);
    const std::vector<int64_t>& stream = timeline_.streamOf(i);
    std::optional<CaptureBreach> breach;
    std::optional<NextMask> mask;  // computed once, when a layer has broken rows
    for (size_t l = 0; l < e.layout.size(); ++l) {
      const auto layer = static_cast<int64_t>(l);
      const auto& entries = timeline_.record.ledger.entries();
      std::vector<int64_t> rows = e.layout[l];
      std::vector<RowVerdict> broken = brokenRows(entries, e.cache, layer, rows, e.contract(layer), stream);
      if (!broken.empty()) {
        if (!mask) mask = hiddenByTheNextMask(i);
        if (!mask->hidden.empty()) {
          rows = withoutMasked(rows, broken, mask->hidden);
          if (rows.size() != e.layout[l].size()) broken = brokenRows(entries, e.cache, layer, rows, e.contract(layer), stream);
        }
      }
      const int64_t held = static_cast<int64_t>(rows.size());
      if (broken.empty() && held == e.contract(layer).rows()) continue;
      if (!breach) {
        breach = breachAt(i);
        breach->expected_rows = e.contract(layer).rows();
        breach->actual_rows = held;
        for (const RowVerdict& v : broken) {
          if (std::find(breach->rows.begin(), breach->rows.end(), v.row) == breach->rows.end()) breach->rows.push_back(v.row);
        }
        breach->verdicts = std::move(broken);
      }
      breach->layers.push_back(layer);
    }
    if (breach) describeStructure(*breach);
    if (breach && mask && mask->explicit_mask) {
      // An engine that may mask rows instead of removing them: say why these count.
      const CaptureStep& step = timeline_.steps[i];
      const size_t others = mask->hidden.size();
      breach->what += "; " + std::string(captureRoleName(step.role)) + " call " + std::to_string(mask->call) +
                      "'s attention mask does not hide them" +
                      (others ? " (it hides " + std::to_string(others) + " other row" + (others == 1 ? "" : "s") + ")" : "");
    }
    return breach;
  }

  CaptureBreach breachAt(size_t i) const {
    const CaptureStep& step = timeline_.steps[i];
    CaptureBreach b;
    b.step = i;
    b.role = step.role;
    b.call = step.call;
    b.operation = step.operation;
    return b;
  }

  std::string rowText(const CaptureStep& step, const RowVerdict& v) const {
    const std::vector<int64_t>& committed = timeline_.record.sequence;
    std::ostringstream out;
    if (v.state == RowState::Missing) {
      out << "position " << v.position << " (" << quoted(text_, v.token) << ") is missing";
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
    out << "row " << v.row << " holds " << (rejected ? "the rejected draft " : "") << quoted(text_, v.token)
        << " (position " << v.position;
    if (v.rope_position != v.position) out << ", rotated for " << v.rope_position;
    out << ")";
    return out.str();
  }

  std::string layersText(const CaptureBreach& b) const {
    const int64_t layers = timeline_.record.layers(cacheRoleOf(b.role));
    if (static_cast<int64_t>(b.layers.size()) == layers) return "";
    std::ostringstream out;
    out << " in layer" << (b.layers.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < b.layers.size(); ++i) out << (i ? ", " : "") << b.layers[i];
    return out.str();
  }

  void describeStructure(CaptureBreach& b) const {
    const CaptureStep& step = timeline_.steps[b.step];
    if (step.operation == CaptureOperation::Between) {
      describeBetween(b, step);
    } else {
      describeForward(b, step);
    }
  }

  void describeBetween(CaptureBreach& b, const CaptureStep& step) const {
    b.kind = captureBetweenKindName(step.change);
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
          out << "nothing was cut: the next call writes at cache position " << b.actual_rows << ", so it attends "
              << b.actual_rows << " rows";
        } else {
          out << "nothing was cut: the cache kept its " << b.actual_rows << " rows";
        }
        break;
      case CaptureBetweenKind::Crop: out << "the cache was cut to " << b.actual_rows << " rows"; break;
      case CaptureBetweenKind::Slice: out << "the cache was sliced to " << b.actual_rows << " rows"; break;
      case CaptureBetweenKind::Reset: out << "the cache was reset to " << b.actual_rows << " rows"; break;
      case CaptureBetweenKind::Overwrite: out << "rows were overwritten in place (" << b.actual_rows << " rows)"; break;
      case CaptureBetweenKind::Roll: out << "the rows were moved to other slots (" << b.actual_rows << " rows)"; break;
      case CaptureBetweenKind::Replace: out << "the cache was replaced by one of " << b.actual_rows << " rows"; break;
    }
    out << " where " << b.expected_rows << " were required" << layersText(b);
    if (!b.verdicts.empty()) out << ": " << rowText(step, b.verdicts.front());
    if (b.verdicts.size() > 1) out << " (" << b.verdicts.size() << " rows wrong)";
    b.what = out.str();
  }

  // The first input whose token is not the stream's at the position it belongs.
  std::optional<int64_t> wrongToken(const CaptureStep& step, const CaptureCall& call,
                                    const std::vector<int64_t>& stream) const {
    for (int64_t k = 0; k < step.inputs; ++k) {
      const int64_t p = step.true_start + k;
      if (p >= static_cast<int64_t>(stream.size()) || stream[static_cast<size_t>(p)] != call.input_ids[static_cast<size_t>(k)]) {
        return k;
      }
    }
    return std::nullopt;
  }

  void describeForward(CaptureBreach& b, const CaptureStep& step) const {
    const CaptureCall& call = callOf(step);
    const std::vector<int64_t>& stream = timeline_.streamOf(b.step);
    const char* role = captureRoleName(step.role);
    const int64_t n = step.inputs;
    std::ostringstream out;
    out << role << " call " << step.call << " fed " << n << " token" << (n == 1 ? "" : "s") << " at position"
        << (n == 1 ? " " : "s ") << span(step.claimed_start, n);
    if (const auto k = wrongToken(step, call, stream)) {
      const int64_t p = step.true_start + *k;
      b.kind = "tokens";
      out << ": input " << *k << " is " << quoted(text_, call.input_ids[static_cast<size_t>(*k)]) << " where "
          << (step.role == CaptureRole::Target ? "the committed sequence" : "the round's sequence") << " holds ";
      if (p < static_cast<int64_t>(stream.size())) {
        out << quoted(text_, stream[static_cast<size_t>(p)]) << " at position " << p;
        if (*k == 0 && step.role == CaptureRole::Target) out << " (the token the previous verify chose was never fed)";
      } else {
        out << "nothing at position " << p;
      }
    } else if (step.true_start < step.landed_row) {
      b.kind = "refed_prefix";
      out << " whose tokens repeat positions " << span(step.true_start, n) << ": ";
      out << (step.true_start == 0 ? "the prefix was fed again" : "tokens were fed again") << " with "
          << step.landed_row << " rows already cached";
    } else if (step.true_start > step.landed_row) {
      b.kind = "skipped_position";
      out << " where " << (n == 1 ? "it belongs" : "they belong") << " at " << span(step.true_start, n) << ": position"
          << (step.true_start - step.landed_row == 1 ? " " : "s ") << span(step.landed_row, step.true_start - step.landed_row)
          << " (" << quoted(text_, stream[static_cast<size_t>(step.landed_row)]) << ") never fed, so "
          << (step.true_start - step.landed_row == 1 ? "its" : "their") << " K/V never written";
    } else if (!step.unwritten.empty()) {
      const int64_t k = step.unwritten.front();
      b.kind = "unwritten";
      out << " but wrote no row for input " << k << " (" << quoted(text_, call.input_ids[static_cast<size_t>(k)])
          << " at position " << step.true_start + k << ")";
      if (step.unwritten.size() > 1) out << " and " << step.unwritten.size() - 1 << " more";
      out << ": its K/V was never stored";
    } else if (step.claimed_start != step.true_start) {
      b.kind = "positions";
      out << " (" << capturePositionsSourceName(call.positions_source) << ") where the " << step.landed_row
          << " rows before them put them at " << span(step.true_start, n) << ": rotated for the wrong positions";
    } else {
      const bool window = std::any_of(b.layers.begin(), b.layers.end(), [&](int64_t l) {
        return timeline_.event(b.step).expectedFirst(l) > 0 || isRing(call, l);
      });
      const bool empty = std::any_of(b.verdicts.begin(), b.verdicts.end(), [&](const RowVerdict& v) { return isEmpty(step, v.entry); });
      b.kind = window ? "window" : empty ? "empty_slot" : "rows";
      out.str("");
      const CacheEvent& e = timeline_.event(b.step);
      const int64_t layer = b.layers.front();
      out << role << " call " << step.call << " left " << b.actual_rows << " rows where "
          << (window ? "its window needs positions " + span(e.contract(layer).first, e.contract(layer).rows())
                     : std::to_string(b.expected_rows) + " were required")
          << layersText(b);
      if (window && timeline_.window[static_cast<int>(step.role)] > 0) {
        out << " (a ring buffer of " << timeline_.window[static_cast<int>(step.role)] << " slots)";
      }
    }
    if (b.kind == "window" || b.kind == "empty_slot" || b.kind == "rows") {
      if (!b.verdicts.empty()) out << ": " << rowText(step, b.verdicts.front());
      if (b.verdicts.size() > 1) out << " (" << b.verdicts.size() << " rows wrong)";
    }
    b.what = out.str();
  }

  bool isRing(const CaptureCall& call, int64_t layer) const {
    return call.after && call.after->layers[static_cast<size_t>(layer)].kind == CaptureLayerKind::Ring;
  }

  // --- a forward without a cache ---------------------------------------------

  CaptureBreach lostCache(size_t i) const {
    const CaptureStep& step = timeline_.steps[i];
    CaptureBreach b = breachAt(i);
    b.kind = "no_cache";
    b.expected_rows = step.true_start;
    b.actual_rows = 0;
    std::ostringstream out;
    out << captureRoleName(step.role) << " call " << step.call << " got no cache yet fed only " << step.inputs
        << " token" << (step.inputs == 1 ? "" : "s") << ", which belong at positions " << span(step.true_start, step.inputs)
        << ": the " << step.true_start << " rows before them were lost";
    b.what = out.str();
    return b;
  }

  // --- the attention mask ----------------------------------------------------

  std::optional<CaptureBreach> mask(size_t i) const {
    const CaptureStep& step = timeline_.steps[i];
    const CaptureCall& call = callOf(step);
    if (!call.attention_mask || step.mask_slots.empty() || isRing(call, 0)) return std::nullopt;
    const CaptureTensor t = file_.tensor(call.attention_mask->tensor);  // BOOL [n or 1, K]
    const std::vector<int64_t>& stream = timeline_.streamOf(i);
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
        const LedgerEntry& row = entry(e);
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
      CaptureBreach b = breachAt(i);
      b.kind = "mask";
      b.expected_rows = p + 1;
      b.actual_rows = p + 1 + static_cast<int64_t>(future.size()) + empty - static_cast<int64_t>(hidden.size());
      for (int64_t l = 0; l < timeline_.record.layers(cacheRoleOf(step.role)); ++l) b.layers.push_back(l);
      std::ostringstream out;
      out << captureRoleName(step.role) << " call " << step.call << "'s attention mask ";
      if (!future.empty()) {
        std::sort(future.begin(), future.end());
        out << "lets input " << k << " (position " << p << ") see position" << (future.size() > 1 ? "s " : " ")
            << span(future.front(), static_cast<int64_t>(future.size())) << " after it: no causal mask among its "
            << step.inputs << " inputs";
        b.rows = future;
      } else if (!hidden.empty()) {
        std::sort(hidden.begin(), hidden.end());
        out << "hides position" << (hidden.size() > 1 ? "s " : " ") << span(hidden.front(), static_cast<int64_t>(hidden.size()))
            << " from input " << k << " (position " << p << "), which must see every position before it";
        b.rows = hidden;
      } else {
        out << "lets input " << k << " (position " << p << ") see " << empty << " empty (zero) slot" << (empty > 1 ? "s" : "");
      }
      b.what = out.str();
      return b;
    }
    return std::nullopt;
  }

  // --- values against the reference ------------------------------------------

  // The reference of a step's stream; null without a model for its role.
  const StreamReference* streamReference(const CaptureStep& step) {
    const int r = static_cast<int>(step.role);
    if (!options_.models[r]) return nullptr;
    const auto key = std::make_pair(r, step.stream);
    auto it = stream_refs_.find(key);
    if (it == stream_refs_.end()) {
      it = stream_refs_.emplace(key, references(step.role).of(timeline_.streams[static_cast<size_t>(step.stream)])).first;
    }
    return &it->second;
  }

  ReferenceStreams& references(CaptureRole role) {
    auto& refs = references_[static_cast<int>(role)];
    if (!refs) refs = std::make_unique<ReferenceStreams>(*options_.models[static_cast<int>(role)], timeline_.record.sequence);
    return *refs;
  }

  std::optional<CaptureBreach> values(size_t i) {
    const CaptureStep& step = timeline_.steps[i];
    const CacheEvent& e = timeline_.event(i);
    if (e.written.empty()) return std::nullopt;
    const StreamReference* run = streamReference(step);
    if (!run) return std::nullopt;
    const AuditTolerance& tol = tolerance_[static_cast<int>(step.role)].rows;
    std::optional<CaptureBreach> breach;
    for (size_t l = 0; l < e.layout.size(); ++l) {
      const auto& rows = e.layout[l];
      for (size_t r = 0; r < rows.size(); ++r) {
        if (std::find(e.written.begin(), e.written.end(), rows[r]) == e.written.end()) continue;
        const LedgerEntry& written = entry(rows[r]);
        if (written.position < 0 || written.position >= run->length()) continue;
        const auto layer = static_cast<int64_t>(l);
        const auto want_k = run->key(layer, written.position);  // [kv_heads, head_dim]
        const auto want_v = run->value(layer, written.position);
        const auto got_k = timeline_.record.ledger.keys(written.row)[static_cast<int64_t>(l)];
        const auto got_v = timeline_.record.ledger.values(written.row)[static_cast<int64_t>(l)];
        const double dk = (got_k - want_k).abs().max().item<double>();
        const double dv = (got_v - want_v).abs().max().item<double>();
        const double scale = std::max(want_k.abs().max().item<double>(), want_v.abs().max().item<double>());
        ++rows_value_checked_;
        max_value_error_ = std::max({max_value_error_, dk, dv});
        if (std::max(dk, dv) <= tol.absolute + tol.relative * scale) continue;
        if (!breach) {
          breach = breachAt(i);
          breach->kind = "values";
          breach->expected_rows = breach->actual_rows = static_cast<int64_t>(rows.size());
        }
        if (std::find(breach->layers.begin(), breach->layers.end(), static_cast<int64_t>(l)) == breach->layers.end()) {
          breach->layers.push_back(static_cast<int64_t>(l));
        }
        if (breach->layers.front() != static_cast<int64_t>(l)) continue;
        RowVerdict v;
        v.cache = e.cache;
        v.layer = static_cast<int64_t>(l);
        v.row = static_cast<int64_t>(r);
        v.entry = rows[r];
        v.token = written.token;
        v.position = written.position;
        v.rope_position = written.rope_position;
        v.state = RowState::WrongValues;
        v.max_abs_dk = dk;
        v.max_abs_dv = dv;
        breach->rows.push_back(v.row);
        breach->verdicts.push_back(v);
      }
    }
    if (breach) {
      const RowVerdict& v = breach->verdicts.front();
      std::ostringstream out;
      out << captureRoleName(step.role) << " call " << step.call << " wrote rows whose K/V differ from the reference forward"
          << layersText(*breach) << ": layer " << v.layer << " row " << v.row << " (" << quoted(text_, v.token)
          << ", position " << v.position << ") max |dK| " << *v.max_abs_dk << ", |dV| " << *v.max_abs_dv;
      if (breach->verdicts.size() > 1) out << " (" << breach->verdicts.size() << " rows wrong)";
      breach->what = out.str();
    }
    return breach;
  }

  // --- the symptom: logits ---------------------------------------------------

  at::Tensor floatTensor(const std::string& name) const {
    const CaptureTensor t = file_.tensor(name);
    std::vector<int64_t> shape = t.shape();
    auto out = torch::empty(shape, t.dtype() == StDType::I32 ? torch::kInt32 : torch::kFloat32);
    std::memcpy(out.data_ptr(), t.data, t.nbytes());
    return out;
  }

  // The reference logits of the call's last `rows` inputs, at the positions
  // they belong: [rows, vocab].
  at::Tensor referenceLogits(const CaptureStep& step, const CaptureCall& call, int64_t rows) {
    const auto& stream = timeline_.streams[static_cast<size_t>(step.stream)];
    const int64_t end = step.true_start + step.inputs;
    std::optional<StreamReference> own;
    const StreamReference* ref = nullptr;
    if (!wrongToken(step, call, stream)) {
      ref = streamReference(step);
    } else {  // the inputs are not the stream's: what a correct engine computes for them where they belong
      std::vector<int64_t> context(stream.begin(), stream.begin() + std::min<int64_t>(step.true_start, stream.size()));
      context.insert(context.end(), call.input_ids.begin(), call.input_ids.end());
      own = references(step.role).of(context);
      ref = &*own;
    }
    const int64_t last = std::min(end, ref->length());
    if (last < rows) return {};  // the stream is shorter than the call's logits: nothing to compare
    std::vector<at::Tensor> out;
    for (int64_t p = last - rows; p < last; ++p) out.push_back(ref->logits(p));
    return torch::stack(out);
  }

  std::optional<CaptureDivergence> firstDivergence() {
    for (size_t i = 0; i < timeline_.steps.size(); ++i) {
      const CaptureStep& step = timeline_.steps[i];
      if (step.operation != CaptureOperation::Forward || !options_.models[static_cast<int>(step.role)]) continue;
      const CaptureCall& call = callOf(step);
      if (!call.logits || call.logits->rows == 0) continue;
      if (auto d = divergenceOf(step, call)) return d;
    }
    return std::nullopt;
  }

  std::optional<CaptureDivergence> divergenceOf(const CaptureStep& step, const CaptureCall& call) {
    c10::InferenceMode guard;
    const int64_t rows = call.logits->rows;
    const at::Tensor logits_ref = referenceLogits(step, call, rows);
    if (!logits_ref.defined()) return std::nullopt;
    const at::Tensor reference = torch::log_softmax(logits_ref, -1);  // [rows, V]
    const double tol = tolerance_[static_cast<int>(step.role)].log_probability;
    const bool full = file_.manifest().logits_mode == CaptureLogitsMode::Full;
    at::Tensor engine_lp, ref_lp, engine_ids;  // [rows, k] comparable log-probabilities
    if (full) {
      const at::Tensor logits = floatTensor(call.logits->logits);
      if (logits.size(1) != reference.size(1)) return std::nullopt;  // another vocabulary width: noted by the caller
      engine_lp = torch::log_softmax(logits, -1);
      ref_lp = reference;
      engine_ids = engine_lp.argmax(-1, true);
    } else {
      engine_ids = floatTensor(call.logits->top_ids).to(torch::kInt64);                           // [rows, k]
      engine_lp = floatTensor(call.logits->top_values) - floatTensor(call.logits->lse).unsqueeze(1);  // [rows, k]
      if (engine_ids.max().item<int64_t>() >= reference.size(1)) return std::nullopt;
      ref_lp = reference.gather(1, engine_ids);
    }
    logit_rows_checked_ += rows;
    const at::Tensor delta = (engine_lp - ref_lp).abs().amax(-1);  // [rows]
    const at::Tensor ref_top = reference.argmax(-1);                 // [rows]
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t engine_top = engine_ids[r][0].item<int64_t>();
      const int64_t reference_top = ref_top[r].item<int64_t>();
      // A different top-1 counts only when the reference tells the two apart.
      const double gap = (reference[r][reference_top] - reference[r][engine_top]).item<double>();
      const double d = delta[r].item<double>();
      if (d <= tol && (engine_top == reference_top || gap <= tol)) continue;
      CaptureDivergence div;
      div.role = step.role;
      div.call = step.call;
      div.input = step.inputs - rows + r;
      div.position = step.true_start + div.input;
      div.max_abs_delta = d;
      if (full) div.kl = klDivergence(reference[r], engine_lp[r]);
      div.engine_top1 = engine_top;
      div.reference_top1 = reference_top;
      std::ostringstream out;
      out << captureRoleName(step.role) << " call " << step.call << "'s logits for input " << div.input << " (position "
          << div.position << ") differ from the reference: max |d log p| " << d;
      if (div.kl) out << ", KL " << *div.kl;
      out << ", top-1 " << quoted(text_, engine_top) << (engine_top == reference_top ? " (same)" : " vs reference " + quoted(text_, reference_top));
      div.what = out.str();
      return div;
    }
    return std::nullopt;
  }

  const CaptureFile& file_;
  const CaptureTimeline& timeline_;
  const CaptureCheckOptions& options_;
  const TokenText& text_;
  CaptureTolerance tolerance_[kCaptureRoles];
  std::unique_ptr<ReferenceStreams> references_[kCaptureRoles];
  std::map<std::pair<int, int64_t>, StreamReference> stream_refs_;  // (role, stream) -> its reference
  int64_t rows_value_checked_ = 0;
  double max_value_error_ = 0;
  int64_t logit_rows_checked_ = 0;
};

}  // namespace

CaptureTolerance captureTolerance(StDType cache_dtype) {
  CaptureTolerance t;
  switch (cache_dtype) {
    case StDType::F16:  // 11-bit mantissa, and float16 activations upstream of layers > 0
      t.rows = {1e-3, 8e-3};
      t.log_probability = 5e-2;
      break;
    case StDType::BF16:  // 8-bit mantissa
      t.rows = {1e-2, 4e-2};
      t.log_probability = 0.25;
      break;
    default:  // float32: only the order of floating-point sums differs
      t.rows = {1e-5, 1e-4};
      t.log_probability = 1e-3;
      break;
  }
  return t;
}

CaptureCheckReport checkCapture(const CaptureFile& file, const CaptureTimeline& timeline,
                                const CaptureCheckOptions& options, const TokenText& text) {
  return Checker(file, timeline, options, text).run();
}

}  // namespace kvscope
