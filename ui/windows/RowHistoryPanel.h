#pragma once
// The selected cache row's history, like a pixel history: who the row is
// (token, written-for and rotary position, birth and death), its verdict at
// the cursor, every cache operation that touched it with the row it sat in
// and its verdict afterwards (and what an injected fault did there), and the
// attention it received in each verify pass. Clicking an operation moves the
// cursor to that moment. Below it, for a hybrid model's capture, its
// recurrent states per call (RecurrentStatesView).
#include "ui/context/RowHistory.h"
#include "ui/windows/ViewerPanel.h"

class QSplitter;
class QTextBrowser;
class QUrl;

namespace kvscope::ui {

class RecurrentStatesView;

class RowHistoryPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit RowHistoryPanel(DebuggerContext& context, QWidget* parent = nullptr);
  QTextBrowser* text() const { return text_; }
  const RowHistory& history() const { return history_; }
  RecurrentStatesView* recurrentStates() const { return recurrent_; }

 protected:
  void refresh() override;

 private:
  QString identityHtml(const SessionSnapshot& snapshot, const Cursor& cursor) const;
  QString missingHtml(const SessionSnapshot& snapshot, const Cursor& cursor) const;
  QString eventsHtml(const Cursor& cursor) const;
  QString attentionHtml(const SessionSnapshot& snapshot, const Cursor& cursor) const;
  void onAnchor(const QUrl& url);

  QTextBrowser* text_;
  RecurrentStatesView* recurrent_;
  QSplitter* split_;
  const SessionSnapshot* recurrent_of_ = nullptr;  // the snapshot the states were listed from
  RowHistory history_;
};

}  // namespace kvscope::ui
