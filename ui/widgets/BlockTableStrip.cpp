#include "ui/widgets/BlockTableStrip.h"

#include <QMouseEvent>
#include <QStringList>
#include <algorithm>
#include <QPainter>
#include <QToolTip>

#include "ui/widgets/Palette.h"
#include "ui/widgets/PoolBlockGrid.h"

namespace kvscope::ui {


namespace {
constexpr int kGap = 3;
}  // namespace

BlockTableStrip::BlockTableStrip(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void BlockTableStrip::setTable(std::shared_ptr<const PoolView> pool, int64_t sequence) {
  pool_ = std::move(pool);
  sequence_ = sequence;
  updateGeometry();
  update();
}

const PoolSequenceTable* BlockTableStrip::table() const { return pool_ ? pool_->table(sequence_) : nullptr; }

// Two lines per cell: the logical block, then the pool block it maps to.
QSize BlockTableStrip::cellSize() const {
  const QFontMetrics metrics = fontMetrics();
  return {metrics.horizontalAdvance(QStringLiteral("00 \u2192 00")) + 8, metrics.height() * 2 + 6};
}

int BlockTableStrip::columnsFor(int width) const { return std::max(1, (width + kGap) / (cellSize().width() + kGap)); }

int BlockTableStrip::heightForWidth(int width) const {
  const PoolSequenceTable* t = table();
  const int entries = t ? static_cast<int>(t->entries.size()) : 0;
  const int rows = (entries + columnsFor(width) - 1) / columnsFor(width);
  return std::max(1, rows) * (cellSize().height() + kGap);
}

QSize BlockTableStrip::sizeHint() const {
  const int width = 8 * (cellSize().width() + kGap);
  return {width, heightForWidth(width)};
}

QRect BlockTableStrip::cellRect(int64_t logical) const {
  const PoolSequenceTable* t = table();
  if (!t || logical < 0 || logical >= static_cast<int64_t>(t->entries.size())) return {};
  const int columns = columnsFor(width());
  const QSize cell = cellSize();
  const int i = static_cast<int>(logical);
  return {(i % columns) * (cell.width() + kGap), (i / columns) * (cell.height() + kGap), cell.width(), cell.height()};
}

bool BlockTableStrip::markedDangling(int64_t logical) const {
  const PoolSequenceTable* t = table();
  if (!t || logical < 0 || logical >= static_cast<int64_t>(t->entries.size())) return false;
  return t->entries[static_cast<size_t>(logical)].dangling;
}

QString BlockTableStrip::entryText(int64_t logical) const {
  const PoolSequenceTable* t = table();
  if (!t || logical < 0 || logical >= static_cast<int64_t>(t->entries.size())) return {};
  const PoolTableEntry& e = t->entries[static_cast<size_t>(logical)];
  const int64_t first = logical * pool_->block_size;
  QString text = tr("sequence %1's logical block %2 (rows %3-%4) \u2192 pool block %5")
                     .arg(sequence_)
                     .arg(logical)
                     .arg(first)
                     .arg(first + pool_->block_size - 1)
                     .arg(e.block);
  if (e.dangling) {
    const int64_t owner = pool_->blocks[static_cast<size_t>(e.block)].owner;
    text += tr("\ndangling: the sequence freed this block but still maps it; the pool now calls it %1")
                .arg(QString::fromStdString(poolOwnerName(owner)));
  }
  return text;
}

void BlockTableStrip::paintEvent(QPaintEvent*) {
  const PoolSequenceTable* t = table();
  if (!t) return;
  QPainter painter(this);
  const QColor fill = Palette::sequence(sequence_);
  const QColor text = fill.lightness() > 150 ? Qt::black : Qt::white;
  for (const PoolTableEntry& e : t->entries) {
    const QRect cell = cellRect(e.logical);
    painter.fillRect(cell, e.dangling ? Palette::freeBlock() : fill);
    if (e.dangling) {
      painter.fillRect(cell, QBrush(Palette::dangling(), Qt::BDiagPattern));
      painter.setPen(QPen(Palette::dangling(), 3));
      painter.drawRect(cell.adjusted(1, 1, -2, -2));
    }
    painter.setPen(e.dangling ? QColor(Qt::black) : text);
    painter.drawText(cell, Qt::AlignCenter, QStringLiteral("L%1\n\u2192 %2").arg(e.logical).arg(e.block));
  }
}

void BlockTableStrip::mouseMoveEvent(QMouseEvent* event) {
  const PoolSequenceTable* t = table();
  if (!t) return;
  for (const PoolTableEntry& e : t->entries) {
    if (cellRect(e.logical).contains(event->position().toPoint())) {
      QToolTip::showText(event->globalPosition().toPoint(), poolTip(entryText(e.logical)), this, cellRect(e.logical));
      return;
    }
  }
  QToolTip::hideText();
}

}  // namespace kvscope::ui
