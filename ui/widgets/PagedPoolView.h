#pragma once
// The KV Cache panel's "Paged pool" tab (docs/paged-cache.md): the block
// pool a paged session's sequences share, at the cursor's moment (replayed
// from the snapshot's pool history; the pool as the run left it when the
// snapshot has none), the moment named in its header. A grid of the
// pool's blocks coloured by owner sequence (free ones grey), the shown
// sequence's block table as a strip below it (logical block -> pool block),
// a dangling entry (freed but still mapped) hatched in red, and a legend
// that wraps. It follows the Batch picker: the snapshot's shown sequence is
// the one whose table is drawn and whose blocks are framed. A Target /
// Drafter switch picks the pool when both caches are paged. A contiguous
// session has no pool: the view says how to get one.
#include <QWidget>
#include <memory>
#include <optional>

#include "core/snapshot/snapshot.h"

class QLabel;
class QRadioButton;
class QStackedWidget;

namespace kvscope::ui {

class BlockTableStrip;
class PoolBlockGrid;
class WrappedLegend;

class PagedPoolView : public QWidget {
  Q_OBJECT
 public:
  explicit PagedPoolView(QWidget* parent = nullptr);

  // Draws the snapshot's pool just after `moment` ran; nullopt (or no
  // history in the snapshot): the pool as the run left it.
  void show(std::shared_ptr<const SessionSnapshot> snapshot, std::optional<Moment> moment = std::nullopt);
  using QWidget::show;
  // The moment drawn (nullopt: the pool as the run left it).
  const std::optional<Moment>& shownMoment() const { return moment_; }

  // Which pool is drawn (Target unless only the drafter's is paged).
  CacheRole shownCache() const { return cache_; }
  void setShownCache(CacheRole cache);
  // The hint instead of the grid (a contiguous session, or none).
  bool showingHint() const;
  const QLabel* hint() const { return hint_; }
  PoolBlockGrid* grid() const { return grid_; }
  BlockTableStrip* tableStrip() const { return strip_; }
  WrappedLegend* legend() const { return legend_; }
  const QLabel* caption() const { return caption_; }

 signals:
  void hoverText(const QString& text);

 private:
  void redraw();
  // The pool to draw: the shown cache's at the moment, built once per
  // snapshot, cache and moment (a cursor move redraws every panel).
  std::shared_ptr<const PoolView> shownPool();
  QString captionText(const PoolView& pool) const;
  QString legendHtml(const PoolView& pool) const;

  std::shared_ptr<const SessionSnapshot> snapshot_;
  std::optional<Moment> moment_;
  CacheRole cache_ = CacheRole::Target;
  struct Built {
    // Weak: it names the snapshot without keeping it, and its control block
    // stays, so a later snapshot at the same address is not taken for it.
    std::weak_ptr<const SessionSnapshot> snapshot;
    CacheRole cache = CacheRole::Target;
    std::optional<Moment> moment;
    std::shared_ptr<const PoolView> pool;
  } built_;
  QStackedWidget* stack_;
  QLabel* hint_;
  QLabel* caption_;
  QRadioButton* target_button_;
  QRadioButton* drafter_button_;
  PoolBlockGrid* grid_;
  QLabel* strip_title_;
  BlockTableStrip* strip_;
  WrappedLegend* legend_;
};

}  // namespace kvscope::ui
