#pragma once
// The target and drafter caches side by side at the cursor (K or V, one
// layer and kv head each), a shared colour-range control, the value under
// the mouse, and the history of the clicked entry.
#include "ui/windows/ViewerPanel.h"

class QButtonGroup;
class QLabel;
class QTextBrowser;

namespace kvscope::ui {

class ColorRangeControl;
class KvHeatmapView;

class KvCachePanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit KvCachePanel(DebuggerContext& context, QWidget* parent = nullptr);

  KvHeatmapView* targetView() const { return target_; }
  KvHeatmapView* drafterView() const { return drafter_; }
  QTextBrowser* history() const { return history_; }
  bool showingValues() const;
  void setShowingValues(bool values);
  // Shows an entry's history (born, attention received, death).
  void showEntry(qint64 entry_index);

 signals:
  void positionRequested(qint64 position);

 protected:
  void refresh() override;

 private:
  QString entryHistory(const SessionSnapshot& snapshot, const LedgerEntry& entry, int layer) const;

  KvHeatmapView* target_;
  KvHeatmapView* drafter_;
  ColorRangeControl* range_;
  QButtonGroup* kv_group_;
  QLabel* hover_;
  QTextBrowser* history_;
  qint64 shown_entry_ = -1;
  qint64 followed_position_ = -1;  // the cursor position whose entry history is shown
};

}  // namespace kvscope::ui
