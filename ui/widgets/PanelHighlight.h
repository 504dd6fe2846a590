#pragma once
// A thick outline drawn over one panel (a lesson page's "look here"): a
// transparent child that covers its target, follows its size and lets every
// mouse event through.
#include <QPointer>
#include <QWidget>

namespace kvscope::ui {

class PanelHighlight : public QWidget {
  Q_OBJECT
 public:
  explicit PanelHighlight(QWidget* parent = nullptr);
  // Outlines `target` (null: nothing).
  void outline(QWidget* target);
  QWidget* target() const { return target_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 private:
  QPointer<QWidget> target_;
};

}  // namespace kvscope::ui
