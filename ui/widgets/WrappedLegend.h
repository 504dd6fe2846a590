#pragma once
// A legend under a plot that wraps instead of being cut at the panel's edge
// (every colour keeps its key at any width and presenter zoom), and takes
// exactly the height of the lines it draws: a layout's estimate for a
// rich-text label reserves lines it never draws, taken from the plots.
#include <QLabel>

namespace kvscope::ui {

class WrappedLegend : public QLabel {
  Q_OBJECT
 public:
  explicit WrappedLegend(const QString& html, QWidget* parent = nullptr);
  // Another text: its lines, at the current width (QLabel::setText keeps the old height).
  void setLegend(const QString& html);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;  // a zoom's new font: new lines

 private:
  void fitHeight(int width);
};

}  // namespace kvscope::ui
