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

 private:
  void showDraftsTable();

  TokenStripWidget* strip_;
  QLabel* legend_;
  QLabel* drafts_caption_;
  RoundDraftsTable* drafts_;
  bool round_has_drafts_ = false;
};

// Tooltip text for draft i of a round as of `phase` (q after draft, p after
// verify, the draw and the verdict after accept).
QString draftTooltip(const SessionSnapshot& snapshot, const RoundRecord& round, int64_t i, Phase phase);

}  // namespace kvscope::ui
