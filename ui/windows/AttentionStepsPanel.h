#pragma once
// Attention step by step, for the teacher: one query (the cursor's position,
// layer, and a query head of the cursor's kv head) explained with the target
// model's own numbers, each step a card with its numbers and a plot: the
// hidden state -> q before/after the rotary embedding -> q . k per key ->
// scaled -> soft-capped -> masked -> softmax weights -> the output vector ->
// through o_proj (this head's share and the layer's whole attention output).
// Below, "what if": tick key rows to remove (or zero channels of K or V) and
// Recompute to see the weights and output after beside before, with the
// change of the next-token distribution.
//
// The rows the query reads (and those ticked) go to the shared context as its
// attention focus, which the KV view marks.
//
// The explanation is an uncached prefill of the session's tokens 0..P at the
// cursor's moment (core/explain/attention_steps.h); it runs on the engine
// thread: the panel emits explainRequested and shows what comes back.
#include <QVector>
#include <vector>

#include "ui/engine/EngineWorker.h"
#include "ui/windows/ViewerPanel.h"

class QComboBox;
class QFrame;
class QGridLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QScrollArea;
class QTableWidget;

namespace kvscope::ui {

class StepBarPlot;

class AttentionStepsPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit AttentionStepsPanel(DebuggerContext& context, QWidget* parent = nullptr);

  // The explanation shown (null before the first one arrives).
  const AttentionExplanation* explanation() const { return explanation_.get(); }
  const WhatIfExplanation* whatIf() const { return what_if_.get(); }
  const ExplainRequest& currentRequest() const { return request_; }
  int queryHead() const { return query_head_; }
  void setQueryHead(int head);  // keeps the shared kv head in step
  StepBarPlot* weightsPlot() const { return weights_.plot; }
  StepBarPlot* outputPlot() const { return output_.plot; }
  StepBarPlot* projectionPlot() const { return projection_.plot; }
  QString projectionText() const;  // the o_proj card's title and text
  QTableWidget* keyTable() const { return table_; }
  QPushButton* recomputeButton() const { return recompute_; }
  QLineEdit* zeroKeyChannels() const { return zero_k_; }
  QLineEdit* zeroValueChannels() const { return zero_v_; }
  QString rotaryText() const;
  QString statusText() const;
  QString whatIfText() const;
  // Ticks (or unticks) key row `position` for removal.
  void setRemoved(int64_t position, bool removed);
  // Whether the panel is on screen (its dock's visibilityChanged: shown,
  // hidden, its tab selected or not). The KV view outlines this panel's query
  // only while it is: a tab behind another would leave an outline nobody can
  // explain.
  void setOnScreen(bool on_screen);
  // Lesson steps (lessonStepNames("attention-steps")): the card or box named
  // `step` (null: unknown name, or a card this model does not show).
  QWidget* stepWidget(const QString& step) const;
  // Scrolls `step`'s top to the top of the view, and keeps it there while the
  // cards change size (an explanation arriving), until the user scrolls.
  void showStep(const QString& step);
  QScrollArea* scrollArea() const { return scroll_; }
  // Nothing on its way: no explanation or what-if pending (after flushRefresh(): the cursor's query asked for).
  bool settled() const { return !pending_ && !what_if_pending_; }
  // The what-if controls one per row (the panel is too narrow for them side by side).
  bool whatIfControlsStacked() const { return what_if_stacked_; }

 signals:
  void explainRequested(const kvscope::ExplainRequest& request, bool what_if);

 public slots:
  void showExplanation(kvscope::ui::ExplanationPtr explanation);
  void showWhatIf(kvscope::ui::WhatIfPtr result);
  void showFailure(const QString& message);

 protected:
  void refresh() override;
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void fitTableToFont();  // row height and column widths from the table's current font
  struct Card {
    QFrame* frame = nullptr;
    QLabel* title = nullptr;
    QLabel* text = nullptr;
    StepBarPlot* plot = nullptr;
  };
  Card makeCard(const QString& name);
  QWidget* buildWhatIfBox();
  void relayout();
  void placeWhatIfControls(bool stacked);
  void fitWhatIfControls();  // stacked when the side-by-side row does not fit the panel
  bool requestFor(const SessionSnapshot& snapshot, const Cursor& cursor, ExplainRequest* out, QString* why);
  void updateSelectors(const SessionSnapshot& snapshot, const Cursor& cursor);
  void clearShown(const QString& why);
  void drawSteps();
  void drawVectors();
  void drawKeySteps();
  void drawProjection();
  void drawResults();
  void fillTable();
  std::vector<int64_t> tickedPositions() const;
  void publishFocus();
  void recompute();
  QStringList keyLabels() const;
  QString tokenText(int64_t id) const;

  QComboBox* layer_box_;
  QComboBox* head_box_;
  QLabel* status_;
  QWidget* cards_widget_;
  QGridLayout* grid_;
  Card hidden_, query_, rotary_, scores_, scaled_, capped_, masked_, weights_, output_, projection_;
  QVector<Card*> cards_;
  QWidget* what_if_box_;
  QTableWidget* table_;
  QComboBox* edit_mode_;
  QLineEdit* zero_k_;
  QLineEdit* zero_v_;
  QPushButton* recompute_;
  QGridLayout* what_if_controls_ = nullptr;
  QLabel* edit_label_ = nullptr;
  QLabel* zero_k_label_ = nullptr;
  QLabel* zero_v_label_ = nullptr;
  bool what_if_stacked_ = false;
  QLabel* what_if_result_;
  int columns_ = 0;
  QScrollArea* scroll_;
  QString wanted_step_;  // showStep()'s, until the user scrolls

  ExplainRequest request_;  // the query asked for (what is shown, once it arrives)
  // Whose model answers it: a live session's, or the loaded target for a
  // replayed file (and which target). The same query of another source is asked again.
  std::string request_source_;
  bool pending_ = false;          // an explanation is on its way
  bool on_screen_ = true;         // until its dock says otherwise (a window never shown: tests)
  bool what_if_pending_ = false;  // a what-if is on its way
  ExplanationPtr explanation_;
  WhatIfPtr what_if_;
  int query_head_ = 0;
  int group_ = 1;
};

}  // namespace kvscope::ui
