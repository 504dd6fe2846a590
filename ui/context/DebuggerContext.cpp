#include "ui/context/DebuggerContext.h"

#include <algorithm>

#include "ui/context/RowLookup.h"

namespace kvscope::ui {

DebuggerContext::DebuggerContext(QObject* parent) : QObject(parent) {}

void DebuggerContext::registerViewer(IDebuggerViewer* viewer) {
  if (!viewers_.contains(viewer)) viewers_.push_back(viewer);
}

void DebuggerContext::unregisterViewer(IDebuggerViewer* viewer) { viewers_.removeAll(viewer); }

Cursor DebuggerContext::latest() const {
  Cursor cursor = cursor_;
  if (!snapshot_) return Cursor{};
  cursor.round = snapshot_->lastRound();
  cursor.phase = snapshot_->lastPhase();
  return cursor;
}

bool DebuggerContext::atLatest() const {
  const Cursor last = latest();
  return cursor_.round == last.round && cursor_.phase == last.phase;
}

Cursor DebuggerContext::clampMoment(Cursor cursor) const {
  const Cursor last = latest();
  if (!snapshot_ || last.round < 0) return Cursor{};
  if (!atOrBefore(cursor.moment(), last.moment())) {
    cursor.round = last.round;
    cursor.phase = last.phase;
  }
  if (cursor.round < 0) cursor.round = 0;
  if (cursor.round == 0) cursor.phase = Phase::Prefill;
  if (cursor.round > 0 && cursor.phase == Phase::Prefill) cursor.phase = Phase::Draft;
  return cursor;
}

void DebuggerContext::clampSelection(Cursor& c, Anchor anchor) const {
  const SessionSnapshot& s = *snapshot_;
  const int64_t entries = static_cast<int64_t>(s.entries.size());
  if (c.entry >= entries) c.entry = -1;
  if (anchor == Anchor::Entry && c.entry >= 0) c.cache = s.entries[static_cast<size_t>(c.entry)].cache;
  if (!s.geometry(c.cache).present) c.cache = CacheRole::Target;
  const CacheGeometry& g = s.geometry(c.cache);
  c.layer = std::clamp<int64_t>(c.layer, 0, std::max<int64_t>(g.layers - 1, 0));
  c.head = std::clamp<int64_t>(c.head, 0, std::max<int64_t>(g.kv_heads - 1, 0));
  const Moment moment = c.moment();
  if (anchor == Anchor::Row) c.entry = entryAtRow(s, c.cache, c.layer, moment, c.row);
  if (anchor == Anchor::Position) c.entry = entryAtPosition(s, c.cache, c.layer, moment, c.position);
  if (c.entry >= 0) {
    c.position = s.entries[static_cast<size_t>(c.entry)].position;
    c.row = rowOfEntry(s, c.cache, c.layer, moment, c.entry);
  } else if (anchor == Anchor::Position) {
    c.row = -1;
  }
  const int64_t length = static_cast<int64_t>(s.sequence.size());
  if (c.position >= length + s.current_gamma + 1) c.position = -1;
}

Cursor DebuggerContext::clamp(Cursor cursor, Anchor anchor) const {
  cursor = clampMoment(cursor);
  if (cursor.valid()) clampSelection(cursor, anchor);
  return cursor;
}

void DebuggerContext::setSnapshot(SnapshotPtr snapshot, SnapshotReason reason) {
  const bool follow = atLatest() || !cursor_.valid();
  const Cursor before = cursor_;
  snapshot_ = std::move(snapshot);
  Cursor next = before;
  Anchor anchor = Anchor::Entry;
  if (reason == SnapshotReason::NewSession || reason == SnapshotReason::Trace) {
    next = latest();  // a different ledger: entries and rows of the old one mean nothing here
    next.entry = next.row = next.position = -1;
  } else if (reason == SnapshotReason::Diff || reason == SnapshotReason::Sequence) {
    // The diff restarted the session, or another sequence's books are shown:
    // the same moment and physical row, re-identified.
    if (!before.valid()) next = latest();
    next.entry = -1;
    anchor = Anchor::Row;
  } else if (reason == SnapshotReason::Step && follow) {
    next = latest();
  }
  cursor_ = snapshot_ ? clamp(next, anchor) : Cursor{};
  for (IDebuggerViewer* viewer : viewers_) viewer->onSessionChanged();
  emit sessionChanged();
  emit cursorChanged();
}

void DebuggerContext::apply(Cursor cursor, IDebuggerViewer* source) {
  if (cursor == cursor_) return;
  cursor_ = cursor;
  for (IDebuggerViewer* viewer : viewers_) {
    if (viewer != source) viewer->onCursorChanged();
  }
  emit cursorChanged();
}

void DebuggerContext::setCursor(Cursor cursor, IDebuggerViewer* source) {
  // An explicit row without an entry (a bad cell, a missing row) is identified here.
  const Anchor anchor = cursor.entry < 0 && cursor.row >= 0 ? Anchor::Row : Anchor::Entry;
  apply(clamp(cursor, anchor), source);
}

void DebuggerContext::selectPosition(int64_t position, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.position = position;
  cursor.entry = -1;
  apply(clamp(cursor, Anchor::Position), source);
}

void DebuggerContext::selectEntry(int64_t entry, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.entry = entry;
  apply(clamp(cursor, Anchor::Entry), source);
  emit rowPicked();
}

void DebuggerContext::selectRow(CacheRole cache, int64_t layer, int64_t row, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.cache = cache;
  cursor.layer = layer;
  cursor.row = row;
  cursor.entry = -1;
  apply(clamp(cursor, Anchor::Row), source);
  emit rowPicked();
}

void DebuggerContext::setLayerHead(CacheRole cache, int64_t layer, int64_t head, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.layer = layer;
  cursor.head = head;
  if (cache == cursor.cache) {
    apply(clamp(cursor, Anchor::Entry), source);
    return;
  }
  cursor.cache = cache;  // the other cache: select its row for the same position
  cursor.entry = -1;
  apply(clamp(cursor, Anchor::Position), source);
}

void DebuggerContext::goToRound(int64_t round, IDebuggerViewer* source) {
  goToMoment({round, round == 0 ? Phase::Prefill : Phase::Prune}, source);
}

void DebuggerContext::goToMoment(const Moment& moment, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.round = moment.round;
  cursor.phase = moment.phase;
  setCursor(cursor, source);
}

bool DebuggerContext::stepHistory(bool whole_round) {
  if (!snapshot_ || !cursor_.valid() || atLatest()) return false;
  const Moment last = latest().moment();
  Moment next = nextMoment(cursor_.moment());
  while (whole_round && next.phase != Phase::Prune && !(next.round == last.round && next.phase == last.phase)) {
    next = nextMoment(next);
  }
  goToMoment(next);
  return true;
}

bool DebuggerContext::stepBackPhase() {
  Moment previous;
  if (!snapshot_ || !cursor_.valid() || !previousMoment(cursor_.moment(), &previous)) return false;
  goToMoment(previous);
  return true;
}

void DebuggerContext::toggleBookmark(int64_t round) {
  if (round < 0) return;
  if (bookmarks_.contains(round)) bookmarks_.removeAll(round);
  else bookmarks_.push_back(round);
  emit bookmarksChanged();
}

void DebuggerContext::setBookmarks(QVector<int64_t> bookmarks) {
  bookmarks_ = std::move(bookmarks);
  emit bookmarksChanged();
}

void DebuggerContext::setAttentionFocus(AttentionFocus focus) {
  if (!focus.active) focus = AttentionFocus{};
  if (focus == attention_focus_) return;
  attention_focus_ = std::move(focus);
  emit attentionFocusChanged();
}

}  // namespace kvscope::ui
