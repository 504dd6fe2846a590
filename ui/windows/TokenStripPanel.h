#pragma once
// The text as it stood at the cursor, each token coloured by origin (prompt,
// accepted draft, correction, bonus); the cursor round's rejected drafts
// struck through, drafts not judged yet outlined. Hover: p, q and the draw.
// Click: selects the position in every panel.
#include "ui/widgets/DisplayToken.h"
#include "ui/widgets/TokenStripWidget.h"
#include "ui/windows/ViewerPanel.h"

class QLabel;

namespace kvscope::ui {

class RoundDraftsTable;

class TokenStripPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit TokenStripPanel(DebuggerContext& context, QWidget* parent = nullptr);
  TokenStripWidget* strip() const { return strip_; }
  // The cursor round's drafts as a table, shown when the panel is tall
  // enough to hold it below the strip (a lesson's stage, not a Debug dock).
  RoundDraftsTable* draftsTable() const { return drafts_; }
  // The full text of the strip's item `index` to the clipboard.
  void copyTokenText(int index) const;

 signals:
  void positionRequested(qint64 position);

 protected:
  void refresh() override;
  void resizeEvent(QResizeEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  // Shows the table when the round has drafts and the panel has room,
  // filling it then: a panel too short for it (or a hidden one) does not
  // build a table nobody sees at every step of the cursor.
  void showDraftsTable();

  TokenStripWidget* strip_;
  QLabel* legend_;
  QLabel* drafts_caption_;
  RoundDraftsTable* drafts_;
  bool round_has_drafts_ = false;
  bool drafts_filled_ = false;  // the table holds the cursor's round
};

// Tooltip text for draft i of a round as of `phase` (q after draft, p after
// verify, the draw and the verdict after accept).
QString draftTooltip(const SessionSnapshot& snapshot, const RoundRecord& round, int64_t i, Phase phase);

}  // namespace kvscope::ui
