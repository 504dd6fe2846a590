#pragma once
// Tokens drawn as coloured boxes that wrap like text. Each item has its own
// background, an optional strike-through (a rejected draft) or dashed outline
// (a draft not judged yet), and a tooltip. Clicking emits the item's position;
// the context menu offers the token's full text (items show it elided).
#include <QString>
#include <QVector>
#include <QWidget>

namespace kvscope::ui {

struct TokenItem {
  QString text;
  QColor background;
  bool struck = false;
  bool pending = false;
  bool selected = false;
  qint64 position = -1;
  qint64 token = -1;  // the id, for "Copy token text" (text may be elided)
  QString tooltip;
};

class TokenStripWidget : public QWidget {
  Q_OBJECT
 public:
  explicit TokenStripWidget(QWidget* parent = nullptr);

  void setItems(QVector<TokenItem> items);
  const QVector<TokenItem>& items() const { return items_; }
  int itemAt(const QPoint& point) const;  // -1 when none
  QRect itemRect(int index) const { return rects_.value(index); }

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  double tokenScale() const { return scale_; }  // > 1 when the strip fills a large stage

 signals:
  void positionClicked(qint64 position);
  void copyTextRequested(int index);  // "Copy token text" in the item's context menu

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // Lays the tokens out at `scale` times the widget's font; the height they take.
  int layoutItems(int width, QVector<QRect>* rects, double scale) const;
  QFont stripFont(double scale) const;
  double fitScale(int width) const;  // 1 in a short dock; larger when the strip has a stage to fill

  QVector<TokenItem> items_;
  QVector<QRect> rects_;
  double scale_ = 1.0;  // of the tokens' font, as laid out now
};

}  // namespace kvscope::ui
