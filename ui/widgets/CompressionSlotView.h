#pragma once
// What one compression slot did to one layer, as two heatmaps sharing the
// prefill positions as rows (position 0 on top, as in the KV view):
//   left   the policy's score of every row, one column per kv head, the
//          selected head outlined, removed cells hatched over their score;
//   right  the K (or V) the compressed cache holds for the selected kv head,
//          one column per channel: rows the policy removed hatched grey (the
//          values are gone from attention), entries element pruning zeroed
//          white.
// Plain data in (a CompressionSummary); nothing here runs a model.
#include <QColor>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <memory>
#include <vector>

#include "core/compress/compression_summary.h"

class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QCPItemText;
class QCustomPlot;
class QLabel;
class QMouseEvent;

namespace kvscope::ui {

class CompressionSlotView : public QWidget {
  Q_OBJECT
 public:
  explicit CompressionSlotView(const QString& slot, QWidget* parent = nullptr);

  // Draws `summary` at layer and kv head (K, or V when `values`).
  // token(position) labels rows in the hover text.
  void showSlot(std::shared_ptr<const CompressionSummary> summary, const QString& label, int64_t layer, int64_t kv_head, bool values,
            const std::function<QString(int64_t)>& token);
  // Nothing drawn; the caption says why (an error, not run yet).
  void showMessage(const QString& label, const QString& why);
  // What the plot says in place of data ("Run to see ..."); empty while it shows data.
  QString placeholderText() const;

  QCustomPlot* plot() const { return plot_; }
  QString caption() const;
  // Read back from what is drawn (tests): the rows the mask shows removed,
  // the entries it shows zeroed, and the score cells shown removed.
  std::vector<int64_t> shownRemovedRows() const;
  int64_t shownZeroedEntries() const;
  std::vector<int64_t> shownRemovedScoreRows(int64_t kv_head) const;

 private:
  void drawScores(const CompressionSummary& s, int64_t layer, int64_t kv_head);
  void drawEntries(const CompressionSummary& s, int64_t layer, int64_t kv_head, bool values);
  void clearMaps();
  void showPlaceholder(bool shown);  // the words in place of data, the hatch off; or back to data
  void onHover(QMouseEvent* event);
  // The longest x-axis labels that do not run into each other (short ones
  // when the plot is narrow or zoomed; the hover over a label gives it whole).
  void fitLabels();

  QString slot_;
  QLabel* caption_;
  QCustomPlot* plot_;
  QCPAxisRect* scores_rect_;
  QCPAxisRect* entries_rect_;
  QCPColorMap* scores_map_;
  QCPColorMap* entries_map_;
  QCPColorScale* entries_scale_;
  QCPItemRect* head_outline_;
  QCPItemText* placeholder_;  // "Run to see ..." while there is nothing to draw
  // What is drawn, for the hover text (shared with the panel's run).
  std::shared_ptr<const CompressionSummary> summary_;
  int64_t layer_ = 0;
  int64_t kv_head_ = 0;
  bool values_ = false;
  std::function<QString(int64_t)> token_;
  QStringList scores_labels_;   // longest first: the first is the whole meaning
  QStringList entries_labels_;
};

}  // namespace kvscope::ui
