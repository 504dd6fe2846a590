#pragma once
// The target and drafter caches side by side at the cursor (K or V, the
// cursor's layer and kv head) and a shared colour-range control; the value
// under the mouse shows in a tooltip beside the pointer (and goes out as
// hoverText, for whoever wants it). Clicking a
// row selects it (its history is the Row History panel's); the layer and
// head pickers and the layer x head overviews move the shared cursor. Each
// heatmap zooms and pans on its own (KvHeatmapView). A second tab, "Paged
// pool", draws a paged session's block pool and the shown sequence's block
// table (PagedPoolView; docs/paged-cache.md).
#include "ui/windows/ViewerPanel.h"

class QButtonGroup;
class QLabel;
class QTabWidget;

class QHBoxLayout;
class QVBoxLayout;

namespace kvscope::ui {

class WrappedLegend;

class ColorRangeControl;
class KvHeatmapView;
class PagedPoolView;

class KvCachePanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit KvCachePanel(DebuggerContext& context, QWidget* parent = nullptr);

  KvHeatmapView* targetView() const { return target_; }
  KvHeatmapView* drafterView() const { return drafter_; }
  bool showingValues() const;
  void setShowingValues(bool values);
  PagedPoolView* poolView() const { return pool_; }
  // Brings the Paged pool tab (true) or the K/V heatmaps (false) to the front.
  void showPoolTab(bool pool);
  bool showingPoolTab() const;

 signals:
  void hoverText(const QString& text);

 protected:
  void refresh() override;
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  // The strips' keys, and a verdict's key only when a row drawn has it (one line beside the controls).
  void updateLegend();
  void placeLegend();

  KvHeatmapView* target_;
  KvHeatmapView* drafter_;
  ColorRangeControl* range_;
  QButtonGroup* kv_group_;
  QTabWidget* tabs_;
  PagedPoolView* pool_;
  WrappedLegend* legend_;
  QHBoxLayout* controls_ = nullptr;
  QVBoxLayout* rows_layout_ = nullptr;
  QString legend_shown_;
};

}  // namespace kvscope::ui
