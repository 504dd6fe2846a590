#pragma once
// Base of every dockable panel: registers with the DebuggerContext on
// construction (unregisters on destruction) and coalesces redraws: any number
// of session/cursor changes within one event-loop turn cause one refresh().
#include <QTimer>
#include <QWidget>

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

 protected:
  virtual void refresh() = 0;
  void scheduleRefresh();
  DebuggerContext& context() { return context_; }
  const DebuggerContext& context() const { return context_; }

 private:
  DebuggerContext& context_;
  QTimer refresh_timer_;
};

}  // namespace kvscope::ui
