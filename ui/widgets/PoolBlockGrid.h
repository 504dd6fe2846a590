#pragma once
// A paged cache's block pool drawn as a grid of cells, one per pool block
// (docs/paged-cache.md): each cell filled with its owner sequence's colour
// (Palette::sequence), free blocks grey; the blocks the shown sequence's
// table maps carry a dark frame, and one it maps after freeing it (a
// dangling entry) a red frame over a red hatch. Hover names the block's
// owner, the positions it holds and its last log entry.
#include <QWidget>
#include <functional>
#include <memory>

#include "core/snapshot/pool_view.h"

namespace kvscope::ui {

class PoolBlockGrid : public QWidget {
  Q_OBJECT
 public:
  explicit PoolBlockGrid(QWidget* parent = nullptr);

  // Draws `pool` (may be null: nothing) with `shown_sequence`'s table highlighted;
  // `token_text` turns a token id into what the hover shows.
  void setPool(std::shared_ptr<const PoolView> pool, int64_t shown_sequence,
               std::function<QString(int64_t)> token_text = {});
  const PoolView* pool() const { return pool_.get(); }

  // Where block `block` is drawn (empty outside the pool), and the block under `at` (-1: none).
  QRect cellRect(int64_t block) const;
  int64_t blockAt(const QPoint& at) const;
  // The hover's text for a block: owner, positions held, last log entry, dangling.
  QString blockText(int64_t block) const;
  // Whether the shown sequence maps the block while it is freed (a dangling entry).
  bool danglingForShown(int64_t block) const;

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;

 signals:
  void hoverText(const QString& text);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  int cellSize() const;
  int columnsFor(int width) const;
  bool mappedByShown(int64_t block) const;

  std::shared_ptr<const PoolView> pool_;
  int64_t shown_ = 0;
  std::function<QString(int64_t)> token_text_;
  int64_t hovered_ = -1;
};

// A hover text as a tooltip: always rich text with the text escaped, so a
// token from a model's files that looks like markup shows as written.
QString poolTip(const QString& text);
// The rows a pool block holds, "positions 4-7", with their tokens when given.
QString poolRowsText(const PoolBlock& block, const std::function<QString(int64_t)>& token_text);
// One block log entry in words: "reuse: block 5 to sequence 2 for rows 4-7, in round 3 verify".
QString poolLogText(const PoolLogEntry& entry, int64_t block_size);

}  // namespace kvscope::ui
