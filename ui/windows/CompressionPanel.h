#pragma once
// The Compression panel: the KV compression lab on the live
// session's prompt and target, for a researcher comparing eviction and
// pruning policies and a teacher showing what a policy throws away.
//
// Two slots, A and B (B optional), each an eviction policy with its budget
// and parameters and/or element pruning. Run sends both to the engine thread
// (EngineController::compress); what comes back is drawn for the layer and kv
// head of the shared cursor:
//   - per slot, the layer's scores (kv heads x positions) and the selected
//     kv head's K or V with the removed rows hatched and zeroed entries white
//     (CompressionSlotView);
//   - KL, top-1 misses and attention mass per decode step, A and B overlaid
//     (CompressionMetricsPlot);
//   - the summary numbers side by side and the layer x head output error
//     (CompressionErrorPlot);
//   - with "self-speculate" on, per slot the target drafting for itself over
//     the slot's compressed cache and verifying over the full one: both caches
//     side by side, removed rows hatched, each generated token's origin
//     (SelfSpeculationView), and alpha in the summary table.
// A setting the core refuses shows the core's message in the panel; the
// other slot still runs.
//
// Small sizes (a 1024x768 laptop, presenter zoom): below about 64 text lines
// of width the settings column folds away (a button brings it back, a small
// Run stays), and below about 40 the results stack in one column (A over B,
// then the metrics, the summary and the output error) and scroll vertically.
#include <QStringList>
#include <array>

#include "ui/engine/CompressionJob.h"
#include "ui/windows/ViewerPanel.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;
class QGridLayout;
class QScrollArea;
class QToolButton;

namespace kvscope::ui {

class CompressionErrorPlot;
class CompressionMetricsPlot;
class CompressionSettingsForm;
class CompressionSlotView;
class SelfSpeculationView;

class CompressionPanel : public ViewerPanel {
  Q_OBJECT
 public:
  static constexpr int kSlots = 2;

  explicit CompressionPanel(DebuggerContext& context, QWidget* parent = nullptr);

  CompressionSettingsForm* form(int slot) const { return forms_[static_cast<size_t>(slot)]; }
  CompressionSlotView* slotView(int slot) const { return views_[static_cast<size_t>(slot)]; }
  SelfSpeculationView* speculationView(int slot) const { return spec_views_[static_cast<size_t>(slot)]; }
  // Gamma of the self-speculation run with each slot (0: off).
  QSpinBox* speculationGammaBox() const { return gamma_; }
  CompressionMetricsPlot* metricsPlot() const { return metrics_; }
  CompressionErrorPlot* errorPlot() const { return error_plot_; }
  QTableWidget* summaryTable() const { return table_; }
  QPushButton* runButton() const { return run_; }
  QSpinBox* maxNewBox() const { return max_new_; }
  QComboBox* layerBox() const { return layer_box_; }
  QComboBox* headBox() const { return head_box_; }
  QString statusText() const;
  // The settings column folded away (small widths; the button beside the legend toggles it).
  bool settingsCollapsed() const { return collapsed_; }
  // The results in one column (A over B) rather than two.
  bool stacked() const { return stacked_; }
  QScrollArea* resultsArea() const { return views_area_; }
  // The last run shown (null before one arrives) and whether one is on its way.
  CompressionRunPtr lastRun() const { return run_result_; }
  bool pending() const { return pending_id_ != 0; }
  void setShowingValues(bool values);

  // Sets slot A (and B, when two are given; else B is off) from the
  // --compression words ("h2o:0.25"). False with the message when one does not read.
  bool applyShorthands(const QStringList& specs, QString* error);
  // Runs the slots on the session's prompt (the Run button).
  void runCompression();
  // Scrolls the results so the self-speculation views start at the top.
  void scrollToSpeculation();

 signals:
  void compressRequested(const kvscope::ui::CompressionRequest& request);

 public slots:
  void showRun(kvscope::ui::CompressionRunPtr run);
  void showFailure(qint64 request_id, const QString& message);

 protected:
  void refresh() override;
  bool showsSession() const override { return false; }  // used before there is a session
  bool eventFilter(QObject* watched, QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  QWidget* buildSettings();
  QWidget* buildViews();
  bool promptTokens(std::vector<int64_t>* prompt, QString* why) const;
  void setStatus(const QString& text, bool error);
  void syncPickers();
  void drawSlots();
  // Slot `slot`'s part of the shown run (null: it did not run then).
  const CompressionSlotResult* resultOf(int slot) const;
  void fillTable();
  void fitTable();
  // Folds the settings and stacks the results to fit the panel's width and font.
  void relayout();
  void arrangeResults(bool stacked);
  QString quotedToken(int64_t id) const;   // 'text' of a token id ('' before a session)
  QString tokenText(int64_t position) const;  // of the shown run's prompt
  // A token of the prompt or of what slot `result` generated while self-speculating.
  QString sequenceTokenText(const SelfSpeculationResult& result, int64_t position) const;
  void drawSpeculation(int slot, const CompressionSlotResult* result, bool values);

  std::array<CompressionSettingsForm*, kSlots> forms_{};
  std::array<CompressionSlotView*, kSlots> views_{};
  std::array<SelfSpeculationView*, kSlots> spec_views_{};
  QSpinBox* gamma_;
  QTabWidget* tabs_;
  QSpinBox* max_new_;
  QComboBox* values_box_;
  QComboBox* layer_box_;
  QComboBox* head_box_;
  QPushButton* run_;
  QLabel* status_;
  CompressionMetricsPlot* metrics_;
  CompressionErrorPlot* error_plot_;
  QTableWidget* table_;
  QScrollArea* settings_area_;
  QScrollArea* views_area_;
  QGridLayout* grid_;
  QWidget* legend_;
  QWidget* summary_box_;  // the table over the output error
  QToolButton* settings_toggle_;
  QToolButton* run_compact_;  // Run while the settings are folded away
  bool collapsed_ = false;
  bool stacked_ = false;
  bool arranged_ = false;
  int auto_collapsed_ = -1;  // the width's choice when last laid out (-1: never)
  int user_collapsed_ = -1;  // the button's choice, kept until the width's choice changes (-1: none)

  int64_t next_id_ = 1;
  int64_t pending_id_ = 0;  // 0: nothing on its way
  std::array<QString, kSlots> form_errors_;  // settings refused before sending (per slot)
  CompressionRunPtr run_result_;
  std::vector<int64_t> run_prompt_;  // the prompt the shown run used (row labels)
  int64_t layer_ = 0;
  int64_t kv_head_ = 0;
};

}  // namespace kvscope::ui
