#pragma once
// One sequence's block table drawn as a strip of cells (docs/paged-cache.md):
// cell i is the sequence's logical block i (its rows [i * block_size,
// (i + 1) * block_size)) and names the pool block it maps to, in the
// sequence's colour; an entry freed while still mapped (dangling) is hatched
// and framed in red. Hover names the rows and the pool block.
#include <QWidget>
#include <memory>

#include "core/snapshot/pool_view.h"

namespace kvscope::ui {

class BlockTableStrip : public QWidget {
  Q_OBJECT
 public:
  explicit BlockTableStrip(QWidget* parent = nullptr);

  void setTable(std::shared_ptr<const PoolView> pool, int64_t sequence);
  const PoolSequenceTable* table() const;

  // Where logical block `logical` is drawn (empty past the table).
  QRect cellRect(int64_t logical) const;
  // "logical block 1 -> pool block 5 (rows 4-7)", and the dangling warning.
  QString entryText(int64_t logical) const;
  // Whether the strip draws the entry as dangling.
  bool markedDangling(int64_t logical) const;

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  QSize cellSize() const;
  int columnsFor(int width) const;

  std::shared_ptr<const PoolView> pool_;
  int64_t sequence_ = 0;
};

}  // namespace kvscope::ui
