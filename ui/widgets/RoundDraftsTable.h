#pragma once
// One round's drafts as a table: each draft's token, the drafter's q(d), the
// target's p(d), the target's own choice at that position and the verdict
// (greedy: equal to the argmax or not; sampled: u against min(1, p/q)).
// The token strip shows the same facts in tooltips; a class at a projector
// cannot hover, so a lesson's stage shows them here, in the room the strip
// leaves (docs/teaching.md).
#include <QTableWidget>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

class RoundDraftsTable : public QTableWidget {
  Q_OBJECT
 public:
  explicit RoundDraftsTable(QWidget* parent = nullptr);

  // The drafts of `round` as of `phase` (p after verify, verdicts after accept).
  void showRound(const SessionSnapshot& snapshot, const RoundRecord& round, Phase phase);
  // The height the header and every row take at the current font.
  int contentHeight() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void fitToFont();
};

}  // namespace kvscope::ui
