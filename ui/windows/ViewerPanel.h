#pragma once
// Base of every dockable panel: registers with the DebuggerContext on
// construction (unregisters on destruction) and coalesces redraws: any number
// of session/cursor changes within one event-loop turn cause one refresh().
// While there is no session, a panel that shows one is covered by a note
// saying how to get one, rather than empty axes that look like data.
#include <QTimer>
#include <QWidget>

class QLabel;

#include "ui/context/DebuggerContext.h"

namespace kvscope::ui {

class ViewerPanel : public QWidget, public IDebuggerViewer {
  Q_OBJECT
 public:
  ViewerPanel(DebuggerContext& context, QWidget* parent = nullptr);
  ~ViewerPanel() override;

  void onSessionChanged() override { scheduleRefresh(); }
  void onCursorChanged() override { scheduleRefresh(); }
  // Runs a pending refresh now (tests, benchmarks).
  void flushRefresh();
  // The note shown while there is no session (null when none is shown).
  const QLabel* emptyNote() const { return empty_note_; }

 protected:
  virtual void refresh() = 0;
  // Whether the panel shows a session (most do); the Session, Lessons and
  // Compression panels are used before there is one, and show no note.
  virtual bool showsSession() const { return true; }
  bool event(QEvent* event) override;
  void scheduleRefresh();
  DebuggerContext& context() { return context_; }
  const DebuggerContext& context() const { return context_; }

 private:
  void refreshAndNote();
  void updateEmptyNote();

  DebuggerContext& context_;
  QTimer refresh_timer_;
  QLabel* empty_note_ = nullptr;
};

}  // namespace kvscope::ui
