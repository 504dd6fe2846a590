#pragma once
// The verify pass of the cursor round: attention of one layer and head, the
// gamma + 1 query rows over the key positions. Rows of accepted drafts and
// the rejected ones are marked; keys a query may not see (causal mask) are
// drawn grey with the mask's edge outlined.
#include "ui/windows/ViewerPanel.h"

class QComboBox;
class QCustomPlot;
class QCPColorMap;
class QLabel;
class QMouseEvent;

namespace kvscope::ui {

class AttentionPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit AttentionPanel(DebuggerContext& context, QWidget* parent = nullptr);
  QCustomPlot* plot() const { return plot_; }
  int queryRows() const { return queries_; }
  QString csv() const;  // query rows x keys of the shown layer/head (masked cells empty)

 signals:
  void positionRequested(qint64 position);

 protected:
  void refresh() override;

 private:
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);

  QComboBox* layer_box_;
  QComboBox* head_box_;
  QLabel* info_;
  QCustomPlot* plot_;
  QCPColorMap* map_;
  int queries_ = 0;
  int keys_ = 0;
  int64_t shown_round_ = -1;
};

}  // namespace kvscope::ui
