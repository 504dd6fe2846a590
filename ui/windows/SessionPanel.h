#pragma once
// Choose models (bundled, recent, browse to a Hugging Face directory, or the
// n-gram drafter) and the session's settings; Load and Start send requests
// to the main window. Shows loading progress and the session's metrics.
#include "core/trace/ui_engine.h"
#include "ui/windows/ViewerPanel.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace kvscope::ui {

class SessionPanel : public ViewerPanel {
  Q_OBJECT
 public:
  explicit SessionPanel(DebuggerContext& context, QWidget* parent = nullptr);

  UiModelSpec modelSpec() const;
  UiSessionSpec sessionSpec() const;
  void setModelDirs(const QString& target_dir, const QString& drafter_dir);
  void setPrompt(const QString& prompt);
  void setGamma(int gamma);
  void setMaxNewTokens(int tokens);
  void setFault(const QString& name);
  void setBusy(bool busy, const QString& what);
  void setProgress(int step, int total, const QString& what);
  void setLoadedModels(const QString& target_dir, const QString& drafter_name);
  void rememberRecent(const QString& dir);

  static QString samplePrompt();

 signals:
  void loadRequested(const kvscope::UiModelSpec& spec);
  void startRequested(const kvscope::UiSessionSpec& spec);

 protected:
  void refresh() override;

 private:
  void browse(QComboBox* box);
  void updateEnabled();

  QComboBox* target_dir_;
  QComboBox* drafter_kind_;
  QComboBox* drafter_dir_;
  QPushButton* drafter_browse_;
  QSpinBox* ngram_;
  QPushButton* load_;
  QProgressBar* progress_;
  QLabel* loaded_;
  QPlainTextEdit* prompt_;
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
  QPushButton* start_;
  QLabel* metrics_;
};

}  // namespace kvscope::ui
