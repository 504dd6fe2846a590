#include "ui/widgets/PoolBlockGrid.h"

#include <QMouseEvent>
#include <QStringList>
#include <algorithm>
#include <QPainter>
#include <QToolTip>

#include "ui/widgets/Palette.h"

namespace kvscope::ui {


namespace {

constexpr int kGap = 3;

QColor textOn(const QColor& fill) { return fill.lightness() > 150 ? Qt::black : Qt::white; }

}  // namespace

QString poolTip(const QString& text) {
  return QStringLiteral("<p style='white-space:pre'>%1</p>").arg(text.toHtmlEscaped());
}

QString poolRowsText(const PoolBlock& block, const std::function<QString(int64_t)>& token_text) {
  if (block.rows.empty()) return block.owner < 0 ? QObject::tr("no rows (free)") : QObject::tr("no rows yet");
  QString text = block.rows.size() == 1
                     ? QObject::tr("position %1").arg(block.rows.front().position)
                     : QObject::tr("positions %1-%2").arg(block.rows.front().position).arg(block.rows.back().position);
  if (!token_text) return text;
  QStringList tokens;
  for (const PoolRow& row : block.rows) tokens << QStringLiteral("%1:'%2'").arg(row.offset).arg(token_text(row.token));
  return text + QStringLiteral(" (") + tokens.join(QStringLiteral(" ")) + QStringLiteral(")");
}

QString poolLogText(const PoolLogEntry& entry, int64_t block_size) {
  const QString rows = QObject::tr("rows %1-%2").arg(entry.first_position).arg(entry.first_position + block_size - 1);
  QString text;
  if (entry.operation == "free") {
    text = entry.still_mapped ? QObject::tr("free: block %1 from sequence %2 (%3), still mapped")
                                    .arg(entry.block)
                                    .arg(entry.sequence)
                                    .arg(rows)
                              : QObject::tr("free: block %1 from sequence %2 (%3)").arg(entry.block).arg(entry.sequence).arg(rows);
  } else if (entry.operation == "unmap") {
    text = QObject::tr("unmap: sequence %1's table dropped block %2 (%3), freed earlier while mapped")
               .arg(entry.sequence)
               .arg(entry.block)
               .arg(rows);
  } else {
    text = QObject::tr("%1: block %2 to sequence %3 for %4")
               .arg(QString::fromStdString(entry.operation))
               .arg(entry.block)
               .arg(entry.sequence)
               .arg(rows);
  }
  if (entry.moment.stamped()) {
    text += QObject::tr(", in round %1 %2").arg(entry.moment.round).arg(QString::fromUtf8(phaseName(entry.moment.phase)));
  }
  return text;
}

PoolBlockGrid::PoolBlockGrid(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void PoolBlockGrid::setPool(std::shared_ptr<const PoolView> pool, int64_t shown_sequence,
                            std::function<QString(int64_t)> token_text) {
  pool_ = std::move(pool);
  shown_ = shown_sequence;
  token_text_ = std::move(token_text);
  updateGeometry();
  update();
}

// A cell holds a two-digit block number at the widget's font (presenter zoom grows it).
int PoolBlockGrid::cellSize() const { return fontMetrics().height() * 2; }

int PoolBlockGrid::columnsFor(int width) const { return std::max(1, (width + kGap) / (cellSize() + kGap)); }

int PoolBlockGrid::heightForWidth(int width) const {
  const int blocks = pool_ ? static_cast<int>(pool_->blocks.size()) : 0;
  const int rows = (blocks + columnsFor(width) - 1) / columnsFor(width);
  return std::max(1, rows) * (cellSize() + kGap);
}

QSize PoolBlockGrid::sizeHint() const { return {8 * (cellSize() + kGap), heightForWidth(8 * (cellSize() + kGap))}; }

QRect PoolBlockGrid::cellRect(int64_t block) const {
  if (!pool_ || block < 0 || block >= static_cast<int64_t>(pool_->blocks.size())) return {};
  const int columns = columnsFor(width());
  const int cell = cellSize();
  const int b = static_cast<int>(block);
  return {(b % columns) * (cell + kGap), (b / columns) * (cell + kGap), cell, cell};
}

int64_t PoolBlockGrid::blockAt(const QPoint& at) const {
  if (!pool_) return -1;
  for (size_t b = 0; b < pool_->blocks.size(); ++b) {
    if (cellRect(static_cast<int64_t>(b)).contains(at)) return static_cast<int64_t>(b);
  }
  return -1;
}

bool PoolBlockGrid::mappedByShown(int64_t block) const {
  const PoolSequenceTable* table = pool_ ? pool_->table(shown_) : nullptr;
  if (!table) return false;
  return std::any_of(table->entries.begin(), table->entries.end(), [block](const PoolTableEntry& e) { return e.block == block; });
}

bool PoolBlockGrid::danglingForShown(int64_t block) const {
  const PoolSequenceTable* table = pool_ ? pool_->table(shown_) : nullptr;
  if (!table) return false;
  return std::any_of(table->entries.begin(), table->entries.end(),
                     [block](const PoolTableEntry& e) { return e.block == block && e.dangling; });
}

QString PoolBlockGrid::blockText(int64_t block) const {
  if (!pool_ || block < 0 || block >= static_cast<int64_t>(pool_->blocks.size())) return {};
  const PoolBlock& b = pool_->blocks[static_cast<size_t>(block)];
  QString text = tr("block %1: %2").arg(block).arg(QString::fromStdString(poolOwnerName(b.owner)));
  if (b.owner >= 0 && b.logical >= 0) text += tr(", its logical block %1").arg(b.logical);
  text += QStringLiteral("\n") + poolRowsText(b, token_text_);
  for (const PoolSequenceTable& table : pool_->tables) {
    for (const PoolTableEntry& e : table.entries) {
      if (e.block == block && e.dangling) {
        text += tr("\nsequence %1 still maps it as its logical block %2 after freeing it (dangling)")
                    .arg(table.sequence)
                    .arg(e.logical);
      }
    }
  }
  text += b.last_log >= 0 ? tr("\nlast: %1").arg(poolLogText(pool_->log[static_cast<size_t>(b.last_log)], pool_->block_size))
                          : tr("\nlast: never handed out");
  return text;
}

void PoolBlockGrid::paintEvent(QPaintEvent*) {
  if (!pool_) return;
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing, false);
  for (const PoolBlock& b : pool_->blocks) {
    const QRect cell = cellRect(b.block);
    const QColor fill = b.owner < 0 ? Palette::freeBlock() : Palette::sequence(b.owner);
    painter.fillRect(cell, fill);
    if (danglingForShown(b.block)) {
      painter.fillRect(cell, QBrush(Palette::dangling(), Qt::BDiagPattern));
      painter.setPen(QPen(Palette::dangling(), 3));
      painter.drawRect(cell.adjusted(1, 1, -2, -2));
    } else if (mappedByShown(b.block)) {
      painter.setPen(QPen(Qt::black, 2));
      painter.drawRect(cell.adjusted(1, 1, -2, -2));
    }
    if (b.block == hovered_) {
      painter.setPen(QPen(Palette::selection(), 2));
      painter.drawRect(cell.adjusted(0, 0, -1, -1));
    }
    painter.setPen(textOn(fill));
    painter.drawText(cell, Qt::AlignCenter, QString::number(b.block));
  }
}

void PoolBlockGrid::mouseMoveEvent(QMouseEvent* event) {
  const int64_t block = blockAt(event->position().toPoint());
  if (block != hovered_) {
    hovered_ = block;
    update();
  }
  const QString text = blockText(block);
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), poolTip(text), this, cellRect(block));
  }
  emit hoverText(text);
}

void PoolBlockGrid::leaveEvent(QEvent* event) {
  hovered_ = -1;
  update();
  QWidget::leaveEvent(event);
}

}  // namespace kvscope::ui
