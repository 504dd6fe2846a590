#include "ui/widgets/PresenterZoom.h"

#include <QComboBox>
#include <QWidget>
#include <algorithm>
#include <qcustomplot.h>

namespace kvscope::ui {

namespace {
constexpr const char* kZoom = "kvscopePresenterZoom";

QFont scaled(const QFont& base, double factor) {
  QFont font = base;
  if (base.pointSizeF() > 0) font.setPointSizeF(base.pointSizeF() * factor);
  else if (base.pixelSize() > 0) font.setPixelSize(std::max(1, static_cast<int>(base.pixelSize() * factor + 0.5)));
  return font;
}

// The object's value at 100%: stored under `key` the first time, read after.
template <typename T>
T baseOf(QObject* object, const char* key, const T& current) {
  const QVariant stored = object->property(key);
  if (stored.isValid()) return stored.value<T>();
  object->setProperty(key, QVariant::fromValue(current));
  return current;
}

void zoomAxis(QCPAxis* axis, double factor) {
  axis->setLabelFont(scaled(baseOf(axis, "kvscopeLabelFont", axis->labelFont()), factor));
  axis->setTickLabelFont(scaled(baseOf(axis, "kvscopeTickFont", axis->tickLabelFont()), factor));
  axis->setSelectedLabelFont(axis->labelFont());
  axis->setSelectedTickLabelFont(axis->tickLabelFont());
}

constexpr const char* kItemZoom = "kvscopeItemZoom";

void zoomTextItems(QCustomPlot* plot, double factor) {
  for (int i = 0; i < plot->itemCount(); ++i) {
    if (auto* text = qobject_cast<QCPItemText*>(plot->item(i))) {
      const QFont zoomed = scaled(baseOf(text, "kvscopeFont", text->font()), factor);
      if (text->font() != zoomed) text->setFont(zoomed);
    }
  }
}

void zoomPlot(QCustomPlot* plot, double factor) {
  for (QCPAxisRect* rect : plot->axisRects()) {
    for (QCPAxis* axis : rect->axes()) zoomAxis(axis, factor);
  }
  for (QCPLayoutElement* element : plot->plotLayout()->elements(true)) {
    auto* scale = qobject_cast<QCPColorScale*>(element);
    if (scale && scale->axis()) zoomAxis(scale->axis(), factor);
  }
  if (plot->legend) {
    plot->legend->setFont(scaled(baseOf(plot->legend, "kvscopeFont", plot->legend->font()), factor));
    for (int i = 0; i < plot->legend->itemCount(); ++i) {
      QCPAbstractLegendItem* item = plot->legend->item(i);
      if (!item) continue;  // an empty cell of the legend's grid
      item->setFont(scaled(baseOf(item, "kvscopeFont", item->font()), factor));
    }
  }
  for (int i = 0; i < plot->graphCount(); ++i) {
    QCPGraph* graph = plot->graph(i);
    QCPScatterStyle style = graph->scatterStyle();
    if (style.isNone()) continue;
    style.setSize(baseOf(graph, "kvscopeMarker", style.size()) * factor);
    graph->setScatterStyle(style);
  }
  for (QCPLayoutElement* element : plot->plotLayout()->elements(true)) {
    if (auto* title = qobject_cast<QCPTextElement*>(element)) {
      title->setFont(scaled(baseOf(title, "kvscopeFont", title->font()), factor));
    }
  }
  zoomTextItems(plot, factor);
  // Panels draw their notes as text items again on every refresh, each at
  // 100%: zoom them just before each replot draws them.
  plot->setProperty(kItemZoom, factor);
  if (!plot->property("kvscopeItemHook").isValid()) {
    plot->setProperty("kvscopeItemHook", true);
    QObject::connect(plot, &QCustomPlot::beforeReplot, plot,
                     [plot] { zoomTextItems(plot, plot->property(kItemZoom).toDouble()); });
  }
  plot->replot(QCustomPlot::rpQueuedReplot);
}

// A combo box's popup: the combo gives it its own font on every change, so
// it is zoomed with the combo (zooming it here too would keep the zoomed
// size as its 100% once the combo had set it).
bool followsItsOwner(const QWidget* widget) {
  return widget->isWindow() && qobject_cast<const QComboBox*>(widget->parentWidget()) != nullptr;
}

bool sameSize(const QFont& a, const QFont& b) {
  return a.pointSizeF() == b.pointSizeF() && a.pixelSize() == b.pixelSize();
}

// Widgets that do not take their parent's font: children of a widget with a
// style sheet (the workspace bar), classes the platform gives a font of their
// own (item views, the status bar), and windows (menus, dialogs). Left alone
// they keep their 100% size at every zoom. One is found by its font differing
// from its parent's once the window's font has changed; its font then is its
// own 100% size, which is kept like any other widget's own font.
void zoomStrays(QWidget* window, double factor) {
  for (QWidget* child : window->findChildren<QWidget*>()) {
    if (child->property("kvscopeFont").isValid() || followsItsOwner(child)) continue;  // zoomed already, or by its owner
    const QWidget* parent = child->parentWidget();
    if (!parent || sameSize(child->font(), parent->font())) continue;
    child->setFont(scaled(baseOf(child, "kvscopeFont", child->font()), factor));
  }
}
}  // namespace

void applyPresenterZoom(QWidget* window, int percent) {
  percent = std::clamp(percent, kMinPresenterZoom, kMaxPresenterZoom);
  const double factor = percent / 100.0;
  window->setProperty(kZoom, percent);
  // Children with a font of their own (bold titles, small tick labels) do not
  // inherit the window's: zoom each from its own 100% size.
  // Their 100% size is read before the window's font changes: a font that
  // sets only boldness would otherwise report the zoomed inherited size.
  QList<QPair<QWidget*, QFont>> own;
  for (QWidget* child : window->findChildren<QWidget*>()) {
    if (followsItsOwner(child)) continue;
    if (child->testAttribute(Qt::WA_SetFont) || child->property("kvscopeFont").isValid()) {
      own << qMakePair(child, baseOf(child, "kvscopeFont", child->font()));
    }
  }
  window->setFont(scaled(baseOf(window, "kvscopeFont", window->font()), factor));
  for (const auto& [child, base] : own) child->setFont(scaled(base, factor));
  zoomStrays(window, factor);
  for (QCustomPlot* plot : window->findChildren<QCustomPlot*>()) zoomPlot(plot, factor);
}

int presenterZoom(const QWidget* window) {
  const QVariant zoom = window->property(kZoom);
  return zoom.isValid() ? zoom.toInt() : 100;
}

}  // namespace kvscope::ui
