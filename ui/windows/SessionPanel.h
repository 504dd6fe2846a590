#pragma once
// Choose models (bundled, recent, browse to a Hugging Face directory, or the
// n-gram drafter) and the session's settings; Load and Start send requests
// to the main window. Shows loading progress, what is actually loaded (the
// live session's or an opened trace's drafter, fault and prompt), and the
// session's metrics.
#include "core/control/session_controller.h"
#include "ui/windows/ViewerPanel.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
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
  SessionSpec sessionSpec() const;
  void setModelDirs(const QString& target_dir, const QString& drafter_dir);
  // How every load from this panel keeps 16-bit weights (the --weights option).
  void setWeightResidency(WeightResidency weights) { weights_ = weights; }
  void setPrompt(const QString& prompt);
  void setGamma(int gamma);
  void setMaxNewTokens(int tokens);
  void setFault(const QString& name);
  // Token eviction on the target's cache, as --evict reads it ("h2o:0.25:every=4"); empty: none.
  void setEviction(const QString& text);
  QString eviction() const;
  void setBookkeeping(const QString& name);  // "exact" or "seed"
  void setGreedy(bool greedy);
  void setSeed(int seed);
  void setUseCache(bool on);
  void setBusy(bool busy, const QString& what);
  void setProgress(int step, int total, const QString& what);
  void setLoadedModels(const QString& target_dir, const QString& drafter_name);
  // A new session, diff or opened trace: the form takes the drafter kind,
  // fault and prompt it really ran with.
  void showSession(const SessionSnapshot& snapshot);
  QString fault() const;
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

 protected:
  void refresh() override;

 private:
  void browse(QComboBox* box);
  void updateEnabled();
  void buildFaultBox();
  void showPromptMenu(const QPoint& at);

  WeightResidency weights_ = WeightResidency::Stored;
  QComboBox* target_dir_;
  QComboBox* drafter_kind_;
  QComboBox* drafter_dir_;
  QPushButton* drafter_browse_;
  QSpinBox* ngram_;
  QPushButton* load_;
  QProgressBar* progress_;
  QLabel* loaded_;
  QPlainTextEdit* prompt_;
  QString full_prompt_;  // set while prompt_ shows an elided prompt (ui/widgets/LongText.h)
  QSpinBox* gamma_;
  QCheckBox* adaptive_;
  QSpinBox* max_new_;
  QComboBox* sampling_;
  QDoubleSpinBox* temperature_;
  QSpinBox* top_k_;
  QDoubleSpinBox* top_p_;
  QSpinBox* seed_;
  QCheckBox* use_cache_;
  QComboBox* bookkeeping_;
  QCheckBox* ignore_eos_;
  QComboBox* fault_;
  QLineEdit* eviction_;
  QPushButton* start_;
  QLabel* metrics_;
  QLabel* session_shown_;
};

}  // namespace kvscope::ui
