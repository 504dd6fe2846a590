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

class TokenStripPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit TokenStripPanel(DebuggerContext& context, QWidget* parent = nullptr);
  TokenStripWidget* strip() const { return strip_; }
  // The full text of the strip's item `index` to the clipboard.
  void copyTokenText(int index) const;

 signals:
  void positionRequested(qint64 position);

 protected:
  void refresh() override;

 private:
  TokenStripWidget* strip_;
  QLabel* legend_;
};

// Tooltip text for draft i of a round as of `phase` (q after draft, p after
// verify, the draw and the verdict after accept).
QString draftTooltip(const SessionSnapshot& snapshot, const RoundRecord& round, int64_t i, Phase phase);

}  // namespace kvscope::ui
