#pragma once
// The shared state all panels observe: the latest session snapshot, the
// global cursor and the bookmarks. Panels read it and send requests; only
// the main window and the engine controller change it.
#include <QObject>
#include <QVector>
#include <memory>

#include "core/trace/snapshot.h"
#include "ui/context/Cursor.h"
#include "ui/context/IDebuggerViewer.h"

namespace kvscope::ui {

using SnapshotPtr = std::shared_ptr<const SessionSnapshot>;

class DebuggerContext : public QObject {
  Q_OBJECT
 public:
  explicit DebuggerContext(QObject* parent = nullptr);

  void registerViewer(IDebuggerViewer* viewer);
  void unregisterViewer(IDebuggerViewer* viewer);

  const SessionSnapshot* snapshot() const { return snapshot_.get(); }
  SnapshotPtr snapshotPtr() const { return snapshot_; }
  const Cursor& cursor() const { return cursor_; }
  // The newest (round, phase) recorded; the cursor follows it while at it.
  Cursor latest() const;
  bool atLatest() const;

  // A new snapshot: the cursor moves to the newest point when it was there
  // (or `follow` is set), else stays where the user put it.
  void setSnapshot(SnapshotPtr snapshot, bool follow);
  // Moves the cursor (clamped to what is recorded) and tells every viewer
  // except `source`.
  void setCursor(Cursor cursor, IDebuggerViewer* source = nullptr);
  void selectPosition(int64_t position, IDebuggerViewer* source = nullptr);
  void goToRound(int64_t round, IDebuggerViewer* source = nullptr);  // that round's last recorded phase

  // Bookmarks: rounds, in the order they were added (Ctrl+1..9 jumps to them).
  const QVector<int64_t>& bookmarks() const { return bookmarks_; }
  void toggleBookmark(int64_t round);
  void setBookmarks(QVector<int64_t> bookmarks);

 signals:
  void sessionChanged();
  void cursorChanged();
  void bookmarksChanged();

 private:
  Cursor clamp(Cursor cursor) const;

  SnapshotPtr snapshot_;
  Cursor cursor_;
  QVector<IDebuggerViewer*> viewers_;
  QVector<int64_t> bookmarks_;
};

}  // namespace kvscope::ui
