#include "ui/context/DebuggerContext.h"

#include <algorithm>

namespace kvscope::ui {

DebuggerContext::DebuggerContext(QObject* parent) : QObject(parent) {}

void DebuggerContext::registerViewer(IDebuggerViewer* viewer) {
  if (!viewers_.contains(viewer)) viewers_.push_back(viewer);
}

void DebuggerContext::unregisterViewer(IDebuggerViewer* viewer) { viewers_.removeAll(viewer); }

Cursor DebuggerContext::latest() const {
  Cursor cursor;
  if (!snapshot_) return cursor;
  cursor.round = snapshot_->lastRound();
  cursor.phase = snapshot_->lastPhase();
  cursor.position = cursor_.position;
  return cursor;
}

bool DebuggerContext::atLatest() const {
  const Cursor last = latest();
  return cursor_.round == last.round && cursor_.phase == last.phase;
}

Cursor DebuggerContext::clamp(Cursor cursor) const {
  const Cursor last = latest();
  if (!snapshot_ || last.round < 0) return Cursor{};
  if (cursor.round > last.round || (cursor.round == last.round && phaseOrder(cursor.phase) > phaseOrder(last.phase))) {
    cursor.round = last.round;
    cursor.phase = last.phase;
  }
  if (cursor.round < 0) cursor.round = 0;
  if (cursor.round == 0) cursor.phase = Phase::Prefill;
  if (cursor.round > 0 && cursor.phase == Phase::Prefill) cursor.phase = Phase::Draft;
  const int64_t length = static_cast<int64_t>(snapshot_->sequence.size());
  if (cursor.position >= length + snapshot_->current_gamma + 1) cursor.position = -1;
  return cursor;
}

void DebuggerContext::setSnapshot(SnapshotPtr snapshot, bool follow) {
  const bool was_latest = atLatest() || !cursor_.valid();
  snapshot_ = std::move(snapshot);
  if (snapshot_ && (follow || was_latest)) {
    Cursor next = latest();
    next.position = cursor_.position;
    cursor_ = clamp(next);
  } else {
    cursor_ = clamp(cursor_);
  }
  for (IDebuggerViewer* viewer : viewers_) viewer->onSessionChanged();
  emit sessionChanged();
  emit cursorChanged();
}

void DebuggerContext::setCursor(Cursor cursor, IDebuggerViewer* source) {
  cursor = clamp(cursor);
  if (cursor == cursor_) return;
  cursor_ = cursor;
  for (IDebuggerViewer* viewer : viewers_) {
    if (viewer != source) viewer->onCursorChanged();
  }
  emit cursorChanged();
}

void DebuggerContext::selectPosition(int64_t position, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.position = position;
  setCursor(cursor, source);
}

void DebuggerContext::goToRound(int64_t round, IDebuggerViewer* source) {
  Cursor cursor = cursor_;
  cursor.round = round;
  cursor.phase = round == 0 ? Phase::Prefill : Phase::Prune;
  setCursor(cursor, source);
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

}  // namespace kvscope::ui
