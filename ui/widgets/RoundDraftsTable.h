#pragma once
// One round's drafts as a table: each draft's token, the drafter's q(d), the
// target's p(d), the target's own choice at that position and the verdict
// (greedy: equal to the argmax or not; sampled: u against min(1, p/q)).
// The token strip shows the same facts in tooltips; a class at a projector
// cannot hover, so a lesson's stage shows them here, in the room the strip
// leaves (docs/teaching.md).
#include <QLabel>
#include <QStringList>
#include <QVector>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// Drawn as rich text (a label), so it takes the panel's font at every zoom like the text around it.
class RoundDraftsTable : public QLabel {
  Q_OBJECT
 public:
  explicit RoundDraftsTable(QWidget* parent = nullptr);

  // The drafts of `round` as of `phase` (p after verify, verdicts after accept).
  void showRound(const SessionSnapshot& snapshot, const RoundRecord& round, Phase phase);
  int rowCount() const { return static_cast<int>(rows_.size()); }
  // Plain text of a cell (columns: draft, token, q, p, target's top token, verdict).
  QString cellText(int row, int column) const;

 private:
  QVector<QStringList> rows_;
};

}  // namespace kvscope::ui
