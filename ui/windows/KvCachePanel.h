#pragma once
// The target and drafter caches side by side at the cursor (K or V, the
// cursor's layer and kv head) and a shared colour-range control; the value
// under the mouse shows in a tooltip beside the pointer (and goes out as
// hoverText, for whoever wants it). Clicking a
// row selects it (its history is the Row History panel's); the layer and
// head pickers and the layer x head overviews move the shared cursor. Each
// heatmap zooms and pans on its own (KvHeatmapView).
#include "ui/windows/ViewerPanel.h"

class QButtonGroup;
class QLabel;

namespace kvscope::ui {

class ColorRangeControl;
class KvHeatmapView;

class KvCachePanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit KvCachePanel(DebuggerContext& context, QWidget* parent = nullptr);

  KvHeatmapView* targetView() const { return target_; }
  KvHeatmapView* drafterView() const { return drafter_; }
  bool showingValues() const;
  void setShowingValues(bool values);

 signals:
  void hoverText(const QString& text);

 protected:
  void refresh() override;

 private:
  KvHeatmapView* target_;
  KvHeatmapView* drafter_;
  ColorRangeControl* range_;
  QButtonGroup* kv_group_;
};

}  // namespace kvscope::ui
