#include "ui/windows/ViewerPanel.h"

namespace kvscope::ui {

ViewerPanel::ViewerPanel(DebuggerContext& context, QWidget* parent) : QWidget(parent), context_(context) {
  refresh_timer_.setSingleShot(true);
  refresh_timer_.setInterval(0);
  connect(&refresh_timer_, &QTimer::timeout, this, [this] { refresh(); });
  context_.registerViewer(this);
}

ViewerPanel::~ViewerPanel() { context_.unregisterViewer(this); }

void ViewerPanel::scheduleRefresh() {
  if (!refresh_timer_.isActive()) refresh_timer_.start();
}

void ViewerPanel::flushRefresh() {
  refresh_timer_.stop();
  refresh();
}

}  // namespace kvscope::ui
