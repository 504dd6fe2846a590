#pragma once
// The shared state all panels observe: the latest session snapshot, the
// global cursor, the bookmarks and the attention focus (the rows the
// explained query reads). Panels read it and change the cursor only
// through the calls below, so every panel sees one selection.
#include <QObject>
#include <QVector>
#include <memory>

#include "core/snapshot/snapshot.h"
#include "ui/context/AttentionFocus.h"
#include "ui/context/Cursor.h"
#include "ui/context/IDebuggerViewer.h"

namespace kvscope::ui {

using SnapshotPtr = std::shared_ptr<const SessionSnapshot>;

// Why a snapshot arrived; decides what the cursor does.
enum class SnapshotReason {
  Step,        // the live session advanced: follow it when the cursor was at the latest moment
  NewSession,  // a new session: go to its latest moment, keep layer and head
  Diff,        // a diff run restarted the session: keep the moment, layer, head and row
  Audit,       // an audit at a recorded moment: nothing moves
  Trace,       // an opened trace: go to its latest moment (the trace's GUI state may move it)
  Sequence,    // another sequence of the live batch: keep the moment, layer, head and physical row
};

class DebuggerContext : public QObject {
  Q_OBJECT
 public:
  explicit DebuggerContext(QObject* parent = nullptr);

  void registerViewer(IDebuggerViewer* viewer);
  void unregisterViewer(IDebuggerViewer* viewer);

  const SessionSnapshot* snapshot() const { return snapshot_.get(); }
  SnapshotPtr snapshotPtr() const { return snapshot_; }
  const Cursor& cursor() const { return cursor_; }
  // The newest (round, phase) recorded, with the cursor's selection.
  Cursor latest() const;
  bool atLatest() const;

  void setSnapshot(SnapshotPtr snapshot, SnapshotReason reason);
  // Moves the cursor (clamped to what is recorded; the row follows the
  // selected entry) and tells every viewer except `source`.
  void setCursor(Cursor cursor, IDebuggerViewer* source = nullptr);
  // A position (token strip): selects the row of the cursor's cache holding it.
  void selectPosition(int64_t position, IDebuggerViewer* source = nullptr);
  // A cache row by identity (a click on a KV row or an attention key).
  void selectEntry(int64_t entry, IDebuggerViewer* source = nullptr);
  // A physical row of a layer at the cursor moment (audit cells, bad cells).
  void selectRow(CacheRole cache, int64_t layer, int64_t row, IDebuggerViewer* source = nullptr);
  // The layer / kv head pickers of every panel; switching cache keeps the position.
  void setLayerHead(CacheRole cache, int64_t layer, int64_t head, IDebuggerViewer* source = nullptr);
  void goToRound(int64_t round, IDebuggerViewer* source = nullptr);  // that round's last recorded phase
  void goToMoment(const Moment& moment, IDebuggerViewer* source = nullptr);
  // Stepping through recorded history: the next phase (or the end of the
  // round). False when the cursor is at the latest moment (step the session).
  bool stepHistory(bool whole_round);
  bool stepBackPhase();

  // Bookmarks: rounds, in the order they were added (Ctrl+1..9 jumps to them).
  const QVector<int64_t>& bookmarks() const { return bookmarks_; }
  void toggleBookmark(int64_t round);
  void setBookmarks(QVector<int64_t> bookmarks);

  // The rows the Attention Step by Step panel's query reads (inactive: none
  // shown). Setting an equal focus emits nothing.
  const AttentionFocus& attentionFocus() const { return attention_focus_; }
  void setAttentionFocus(AttentionFocus focus);
  void clearAttentionFocus() { setAttentionFocus(AttentionFocus{}); }

 signals:
  void sessionChanged();
  void cursorChanged();
  void bookmarksChanged();
  void attentionFocusChanged();
  // A row was picked by identity or physical row (a click on a KV row, an
  // attention key): the window brings the Row History forward when it is
  // a tab behind another panel.
  void rowPicked();

 private:
  enum class Anchor { Entry, Row, Position };  // what a new cursor's row is derived from
  Cursor clamp(Cursor cursor, Anchor anchor = Anchor::Entry) const;
  Cursor clampMoment(Cursor cursor) const;
  void clampSelection(Cursor& cursor, Anchor anchor) const;
  void apply(Cursor cursor, IDebuggerViewer* source);

  SnapshotPtr snapshot_;
  Cursor cursor_;
  QVector<IDebuggerViewer*> viewers_;
  QVector<int64_t> bookmarks_;
  AttentionFocus attention_focus_;
};

}  // namespace kvscope::ui
