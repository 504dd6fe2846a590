#pragma once
// Choose models (bundled, recent, browse to a Hugging Face directory, or the
// n-gram drafter) and the session's settings; Load and Start send requests
// to the main window. Shows loading progress, what is actually loaded (the
// live session's or an opened trace's drafter, fault and prompt), and the
// session's metrics.
#include <optional>

#include "core/control/session_controller.h"
#include "ui/windows/ViewerPanel.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace kvscope::ui {

class SessionPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit SessionPanel(DebuggerContext& context, QWidget* parent = nullptr);

  ModelSpec modelSpec() const;
  // The form's prompt and options. nullopt, with *error saying why, when the
  // options are refused: an eviction text --evict would refuse, or a
  // combination SessionOptions::validate refuses.
  std::optional<SessionSpec> sessionSpec(QString* error = nullptr) const;
  // Every option's widget from `options` (core/decode/session_options.h:
  // the one declaration and its defaults). Options without a widget (the
  // adaptive bounds, what is recorded) are kept and come back in sessionSpec().
  void setOptions(const SessionOptions& options);
  void setModelDirs(const QString& target_dir, const QString& drafter_dir);
  // How every load from this panel keeps 16-bit weights (the --weights option).
  void setWeightResidency(WeightResidency weights) { weights_ = weights; }
  void setPrompt(const QString& prompt);
  // Whether each line of the prompt box is a sequence of one batch.
  void setBatchLines(bool batch);
  void setBusy(bool busy, const QString& what);
  void setProgress(int step, int total, const QString& what);
  void setLoadedModels(const QString& target_dir, const QString& drafter_name);
  // A new session, diff or opened trace: the form takes the drafter kind,
  // fault and prompt it really ran with.
  void showSession(const SessionSnapshot& snapshot);
  // The prompt Start runs: the full text, also when the box shows it elided.
  QString prompt() const;
  bool promptElided() const;
  void copyFullPrompt() const;  // to the clipboard
  DrafterKind drafterKind() const;
  void rememberRecent(const QString& dir);

  static QString samplePrompt();

 signals:
  void loadRequested(const kvscope::ModelSpec& spec);
  void startRequested(const kvscope::SessionSpec& spec);
  // Start was pressed with options the session would refuse (sessionSpec()'s error).
  void startRefused(const QString& message);

 protected:
  void refresh() override;
  bool showsSession() const override { return false; }  // used before there is a session

 private:
  void browse(QComboBox* box);
  void updateEnabled();
  void buildFaultBox();
  void showPromptMenu(const QPoint& at);
  void selectFault(const QString& name);  // "none" or a fault's name; anything else: none
  // The Evict field as --evict reads it ("" or "none": no eviction); throws Error.
  std::optional<SessionEviction> evictionOfField() const;
  void markEvictionText();  // the field says when --evict would refuse its text

  WeightResidency weights_ = WeightResidency::Stored;
  SessionOptions options_;  // the options without a widget, as setOptions() gave them
  QComboBox* target_dir_;
  QComboBox* drafter_kind_;
  QComboBox* drafter_dir_;
  QPushButton* drafter_browse_;
  QSpinBox* ngram_;
  QPushButton* load_;
  QProgressBar* progress_;
  QLabel* loaded_;
  QGroupBox* models_box_;  // titled for what its models are to the shown run
  QPlainTextEdit* prompt_;
  QString full_prompt_;  // set while prompt_ shows an elided prompt (ui/widgets/LongText.h)
  QSpinBox* gamma_;
  QCheckBox* adaptive_;
  QDoubleSpinBox* draft_confidence_;
  QSpinBox* max_new_;
  QComboBox* sampling_;
  QDoubleSpinBox* temperature_;
  QSpinBox* top_k_;
  QDoubleSpinBox* top_p_;
  QSpinBox* seed_;
  QCheckBox* use_cache_;
  QComboBox* bookkeeping_;
  QCheckBox* ignore_eos_;
  QCheckBox* batch_lines_;  // each line of the prompt box is a sequence of one batch
  QComboBox* fault_;
  QLineEdit* eviction_;
  QComboBox* cache_layout_;  // contiguous or paged[:BLOCK] (docs/paged-cache.md)
  QComboBox* batch_layout_;  // ragged or padded (docs/batching.md, "The padded layout")
  QString eviction_help_;  // the field's tooltip: the --evict form and the policies
  QPushButton* start_;
  QLabel* metrics_;
  QLabel* session_shown_;
};

}  // namespace kvscope::ui
