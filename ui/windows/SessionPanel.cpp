#include "ui/windows/SessionPanel.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QGuiApplication>
#include <QMenu>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/cache/eviction_policy.h"
#include "core/cache/fault.h"
#include "core/error.h"
#include "ui/widgets/LongText.h"
#include "ui/widgets/ModelName.h"

namespace kvscope::ui {

namespace {
const QString kDefaultDir = QObject::tr("(bundled)");
// A trace without the typed prompt gets it rebuilt from its tokens' texts:
// bounded, since each of thousands of tokens may hold megabytes of text.
constexpr size_t kPromptRebuiltBytes = size_t{16} << 20;

QComboBox* dirBox() {
  auto* box = new QComboBox;
  box->setEditable(true);
  box->addItem(kDefaultDir);
  box->setInsertPolicy(QComboBox::NoInsert);
  box->setMinimumContentsLength(8);
  box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  const QStringList recent = QSettings().value(QStringLiteral("recentModelDirs")).toStringList();
  for (const QString& dir : recent) box->addItem(dir);
  return box;
}

std::string dirOf(const QComboBox* box) {
  const QString text = box->currentText().trimmed();
  return text.isEmpty() || text == kDefaultDir ? std::string() : text.toStdString();
}

QWidget* withButton(QWidget* field, QPushButton* button) {
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(field, 1);
  layout->addWidget(button);
  return row;
}
}  // namespace

// The bundled models are trained on the King James Version (resources/models).
QString SessionPanel::samplePrompt() { return QStringLiteral("And the LORD spake unto Moses, saying,"); }

SessionPanel::SessionPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  // --- models ---
  target_dir_ = dirBox();
  target_dir_->setObjectName(QStringLiteral("targetDir"));
  auto* target_browse = new QPushButton(tr("Browse\u2026"));
  drafter_kind_ = new QComboBox;
  drafter_kind_->addItem(tr("Model"), static_cast<int>(DrafterKind::Model));
  drafter_kind_->addItem(tr("N-gram (prompt lookup)"), static_cast<int>(DrafterKind::Ngram));
  drafter_kind_->addItem(tr("None (target only)"), static_cast<int>(DrafterKind::None));
  drafter_dir_ = dirBox();
  drafter_dir_->setObjectName(QStringLiteral("drafterDir"));
  drafter_browse_ = new QPushButton(tr("Browse\u2026"));
  ngram_ = new QSpinBox;
  ngram_->setRange(1, 8);
  ngram_->setValue(3);
  load_ = new QPushButton(tr("Load models"));
  load_->setObjectName(QStringLiteral("loadModels"));
  progress_ = new QProgressBar;
  progress_->setTextVisible(true);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(tr("idle"));
  loaded_ = new QLabel(tr("no models loaded"));
  loaded_->setWordWrap(true);

  auto* models = new QGroupBox(tr("Models"));
  models->setObjectName(QStringLiteral("modelsBox"));
  models_box_ = models;
  auto* model_form = new QFormLayout(models);
  model_form->addRow(tr("Target"), withButton(target_dir_, target_browse));
  model_form->addRow(tr("Drafter"), drafter_kind_);
  model_form->addRow(tr("Drafter dir"), withButton(drafter_dir_, drafter_browse_));
  model_form->addRow(tr("Max n-gram"), ngram_);
  model_form->addRow(load_);
  model_form->addRow(progress_);
  model_form->addRow(loaded_);

  // --- session ---
  prompt_ = new QPlainTextEdit(samplePrompt());
  prompt_->setObjectName(QStringLiteral("prompt"));
  prompt_->setMaximumHeight(70);
  prompt_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(prompt_, &QWidget::customContextMenuRequested, this, &SessionPanel::showPromptMenu);
  // Ranges from the session's own limits; values from setOptions(SessionOptions{}) below.
  gamma_ = new QSpinBox;
  gamma_->setRange(1, static_cast<int>(SessionLimits::kMaxGamma));
  adaptive_ = new QCheckBox(tr("adaptive"));
  auto* gamma_row = new QWidget;
  auto* gamma_layout = new QHBoxLayout(gamma_row);
  gamma_layout->setContentsMargins(0, 0, 0, 0);
  gamma_layout->addWidget(gamma_);
  gamma_layout->addWidget(adaptive_);
  draft_confidence_ = new QDoubleSpinBox;
  draft_confidence_->setObjectName(QStringLiteral("draftConfidence"));
  draft_confidence_->setRange(0.0, 1.0);
  draft_confidence_->setDecimals(3);
  draft_confidence_->setSingleStep(0.05);
  draft_confidence_->setSpecialValueText(tr("off (always gamma drafts)"));
  draft_confidence_->setToolTip(tr("A round's drafting stops after a draft the drafter gave a probability below this, "
                                   "that draft still proposed (Hugging Face's assistant_confidence_threshold, 0.4 "
                                   "there). Unlikely drafts cost a drafter step and a verify row each and are seldom "
                                   "accepted. Off: every round drafts gamma tokens."));
  max_new_ = new QSpinBox;
  max_new_->setRange(1, static_cast<int>(SessionLimits::kMaxNewTokens));
  sampling_ = new QComboBox;
  sampling_->addItems({tr("Greedy"), tr("Sample")});
  temperature_ = new QDoubleSpinBox;
  temperature_->setRange(0.05, 5.0);
  temperature_->setDecimals(3);  // a lesson's 0.875 shows, and runs, as 0.875
  temperature_->setSingleStep(0.1);
  top_k_ = new QSpinBox;
  top_k_->setRange(0, static_cast<int>(SessionLimits::kMaxTopK));
  top_k_->setSpecialValueText(tr("off"));
  top_p_ = new QDoubleSpinBox;
  top_p_->setRange(0.01, 1.0);
  top_p_->setDecimals(3);
  top_p_->setSingleStep(0.05);
  seed_ = new QSpinBox;
  seed_->setRange(0, static_cast<int>(SessionLimits::kMaxSeed));
  use_cache_ = new QCheckBox(tr("KV cache on"));
  bookkeeping_ = new QComboBox;
  bookkeeping_->addItem(tr("exact (keep L'-1)"), QStringLiteral("exact"));
  bookkeeping_->addItem(tr("seed (one fewer, re-fed)"), QStringLiteral("seed"));
  ignore_eos_ = new QCheckBox(tr("ignore EOS"));
  batch_lines_ = new QCheckBox(tr("one sequence per line (a batch)"));
  batch_lines_->setObjectName(QStringLiteral("batchLines"));
  batch_lines_->setToolTip(tr("Each non-empty line of the prompt box is a prompt of its own, all decoded together: "
                              "batched forwards, each sequence accepting its own drafts and rolled back on its own "
                              "(docs/batching.md). The views show one sequence at a time."));
  buildFaultBox();
  eviction_ = new QLineEdit;
  eviction_->setObjectName(QStringLiteral("eviction"));
  eviction_->setPlaceholderText(tr("none, or h2o:0.25:every=4"));
  QStringList policies;
  for (EvictionPolicy policy : allEvictionPolicies()) policies << QString::fromUtf8(evictionPolicyName(policy));
  eviction_help_ = (tr("Token eviction on the target's cache: POLICY:BUDGET[:every=N][:sinks=N][:window=N]"
                           "[:kernel=K][:seed=S], as kvscope-cli run --evict. Policies: %1. BUDGET is a fraction of "
                           "the rows (0.25) or a row count (48); every=N also re-compresses after every N-th round. "
                           "Evicted rows stay in the cache, hatched in the KV view, and attention no longer reads "
                           "them; the diff names the eviction, not a bug.")
                            .arg(policies.join(QStringLiteral(", "))));
  eviction_->setToolTip(eviction_help_);
  cache_layout_ = new QComboBox;
  cache_layout_->setObjectName(QStringLiteral("cacheLayout"));
  cache_layout_->setEditable(true);  // any paged:BLOCK, as --cache-layout
  cache_layout_->addItems({QStringLiteral("contiguous"), QStringLiteral("paged:4"), QStringLiteral("paged:16")});
  cache_layout_->setToolTip(tr("Where K/V rows live: contiguous (one tensor per layer), or paged[:BLOCK], blocks of "
                               "BLOCK rows in a pool the batch's sequences share, as vLLM keeps them. The KV Cache "
                               "panel's Paged pool tab draws the pool (docs/paged-cache.md)."));
  batch_layout_ = new QComboBox;
  batch_layout_->setObjectName(QStringLiteral("batchLayout"));
  batch_layout_->addItems({QStringLiteral("ragged"), QStringLiteral("padded")});
  batch_layout_->setToolTip(tr("How a batch's sequences share a forward: ragged (each feeds its own inputs, no pads), "
                               "or padded (prompts left-padded to the longest, every forward as wide as its widest "
                               "sequence, pad rows masked), as a [B, T] engine does (docs/batching.md)."));
  start_ = new QPushButton(tr("Start session"));
  start_->setObjectName(QStringLiteral("startSession"));

  auto* session = new QGroupBox(tr("Session"));
  auto* form = new QFormLayout(session);
  form->addRow(tr("Prompt"), prompt_);
  form->addRow(QString(), batch_lines_);
  form->addRow(tr("Gamma"), gamma_row);
  form->addRow(tr("Stop drafting below"), draft_confidence_);
  form->addRow(tr("Max new tokens"), max_new_);
  form->addRow(tr("Sampling"), sampling_);
  form->addRow(tr("Temperature"), temperature_);
  form->addRow(tr("Top-k"), top_k_);
  form->addRow(tr("Top-p"), top_p_);
  form->addRow(tr("Seed"), seed_);
  form->addRow(tr("Cache"), use_cache_);
  form->addRow(tr("Bookkeeping"), bookkeeping_);
  form->addRow(QString(), ignore_eos_);
  form->addRow(tr("Fault"), fault_);
  form->addRow(tr("Evict"), eviction_);
  form->addRow(tr("Cache layout"), cache_layout_);
  form->addRow(tr("Batch layout"), batch_layout_);
  form->addRow(start_);

  session_shown_ = new QLabel;
  session_shown_->setObjectName(QStringLiteral("sessionShown"));
  session_shown_->setWordWrap(true);
  session_shown_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  session_shown_->hide();  // until a session, trace or capture is shown
  metrics_ = new QLabel;
  metrics_->setObjectName(QStringLiteral("metrics"));
  metrics_->setWordWrap(true);
  metrics_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  // What the views show comes first: a replayed trace or a capture is not the
  // loaded models' session, and the fields below were saying otherwise.
  layout->addWidget(session_shown_);
  layout->addWidget(models);
  layout->addWidget(session);
  layout->addWidget(metrics_);
  layout->addStretch(1);

  connect(target_browse, &QPushButton::clicked, this, [this] { browse(target_dir_); });
  connect(drafter_browse_, &QPushButton::clicked, this, [this] { browse(drafter_dir_); });
  connect(drafter_kind_, &QComboBox::currentIndexChanged, this, &SessionPanel::updateEnabled);
  connect(sampling_, &QComboBox::currentIndexChanged, this, &SessionPanel::updateEnabled);
  connect(load_, &QPushButton::clicked, this, [this] { emit loadRequested(modelSpec()); });
  connect(start_, &QPushButton::clicked, this, [this] {
    QString error;
    if (const auto spec = sessionSpec(&error)) emit startRequested(*spec);
    else emit startRefused(error);
  });
  connect(eviction_, &QLineEdit::textChanged, this, &SessionPanel::markEvictionText);
  setOptions(SessionOptions{});
  updateEnabled();
}

namespace {
// A fault's tooltip: what breaks and the real bug it mirrors, wrapped for reading.
QString faultTooltip(const FaultInfo& info) {
  return QStringLiteral("<p><b>%1</b></p><p><b>Breaks:</b> %2</p><p><b>Real world:</b> %3</p>")
      .arg(QString::fromUtf8(info.name), QString::fromUtf8(info.breaks).toHtmlEscaped(),
           QString::fromUtf8(info.real_world).toHtmlEscaped());
}
}  // namespace

void SessionPanel::buildFaultBox() {
  fault_ = new QComboBox;
  fault_->setObjectName(QStringLiteral("fault"));
  fault_->addItem(tr("none"), QStringLiteral("none"));
  fault_->setItemData(0, tr("No fault: the cache is handled correctly."), Qt::ToolTipRole);
  for (const FaultInfo& info : allFaults()) {
    fault_->addItem(QString::fromUtf8(info.name), QString::fromUtf8(info.name));
    fault_->setItemData(fault_->count() - 1, faultTooltip(info), Qt::ToolTipRole);
  }
  // The closed box explains the chosen fault too (item tooltips show only in the open list).
  const auto follow = [this] { fault_->setToolTip(fault_->currentData(Qt::ToolTipRole).toString()); };
  connect(fault_, &QComboBox::currentIndexChanged, this, follow);
  follow();
}

void SessionPanel::selectFault(const QString& name) { fault_->setCurrentIndex(std::max(0, fault_->findData(name))); }

std::optional<SessionEviction> SessionPanel::evictionOfField() const {
  const std::string text = eviction_->text().trimmed().toStdString();
  if (text.empty() || text == "none") return std::nullopt;
  return parseSessionEviction(text);
}

void SessionPanel::markEvictionText() {
  QString error;
  try {
    evictionOfField();
  } catch (const Error& e) {
    error = QString::fromStdString(e.what());
  }
  QPalette palette = eviction_->palette();
  palette.setColor(QPalette::Text,
                   error.isEmpty() ? QApplication::palette().color(QPalette::Text) : QColor(0xb0, 0x00, 0x20));
  eviction_->setPalette(palette);
  eviction_->setProperty("refusal", error);
  eviction_->setToolTip(error.isEmpty() ? eviction_help_
                                        : error.toHtmlEscaped() + QStringLiteral("<hr>") + eviction_help_);
}
void SessionPanel::setBatchLines(bool batch) { batch_lines_->setChecked(batch); }

QString SessionPanel::prompt() const { return promptElided() ? full_prompt_ : prompt_->toPlainText(); }
DrafterKind SessionPanel::drafterKind() const { return static_cast<DrafterKind>(drafter_kind_->currentData().toInt()); }

void SessionPanel::showSession(const SessionSnapshot& snapshot) {
  selectFault(QString::fromStdString(snapshot.fault));
  std::string prompt = snapshot.prompt;
  if (prompt.empty()) {  // a trace saved without the typed text: the prompt's tokens, up to 16 MiB
    for (int64_t i = 0; i < snapshot.prompt_length && i < static_cast<int64_t>(snapshot.sequence.size()) &&
                        prompt.size() < kPromptRebuiltBytes;
         ++i) {
      prompt += snapshot.tokenText(snapshot.sequence[static_cast<size_t>(i)]);
    }
  }
  if (!prompt.empty()) setPrompt(QString::fromStdString(prompt));
  const QString drafter = elidedForDisplay(snapshot.drafter_name, kNameShownBytes);
  const DrafterKind kind = drafter == QStringLiteral("none") || drafter.isEmpty() ? DrafterKind::None
                           : !snapshot.drafter.present                             ? DrafterKind::Ngram
                                                                                   : DrafterKind::Model;
  drafter_kind_->setCurrentIndex(std::max(0, drafter_kind_->findData(static_cast<int>(kind))));
  // A file's run is marked off from the loaded models' (which only Start uses).
  const bool from_file = snapshot.from_capture || snapshot.replay_only;
  session_shown_->show();
  // "(bundled)" below names the loaded models, which a file's run did not use.
  models_box_->setTitle(from_file ? tr("Loaded models (for Start, not the file's)") : tr("Models"));
  session_shown_->setStyleSheet(from_file ? QStringLiteral("QLabel { background:#fff4d6; border:1px solid #d9b650; padding:3px; }")
                                          : QString());
  const QString not_the_loaded =
      tr("<br>The views show this file's run; the loaded models below are not used until you press Start.");
  if (snapshot.from_capture) {
    session_shown_->setText(tr("<b>Opened capture</b>: %1 &middot; %2 &middot; %3")
                                .arg(modelWithRole(tr("target"), elidedForDisplay(snapshot.target_name, kNameShownBytes)).toHtmlEscaped())
                                .arg(modelWithRole(tr("drafter"), drafter).toHtmlEscaped())
                                .arg(elidedForDisplay(snapshot.options_summary, kNameShownBytes).toHtmlEscaped()) +
                            not_the_loaded);
    return;
  }
  session_shown_->setText(tr("<b>%1</b>: %2 &middot; %3 &middot; fault <b>%4</b>")
                              .arg(snapshot.replay_only ? tr("Opened trace (replay)")
                                   : snapshot.finished  ? tr("Finished session")
                                                        : tr("Live session"))
                              .arg(modelWithRole(tr("target"), elidedForDisplay(snapshot.target_name, kNameShownBytes)).toHtmlEscaped())
                              .arg(modelWithRole(tr("drafter"), drafter).toHtmlEscaped())
                              .arg(elidedForDisplay(snapshot.fault, kNameShownBytes).toHtmlEscaped()) +
                          (snapshot.replay_only ? not_the_loaded : QString()));
}

void SessionPanel::updateEnabled() {
  const auto kind = static_cast<DrafterKind>(drafter_kind_->currentData().toInt());
  drafter_dir_->setEnabled(kind == DrafterKind::Model);
  drafter_browse_->setEnabled(kind == DrafterKind::Model);
  ngram_->setEnabled(kind == DrafterKind::Ngram);
  const bool sample = sampling_->currentIndex() == 1;
  temperature_->setEnabled(sample);
  top_k_->setEnabled(sample);
  top_p_->setEnabled(sample);
  seed_->setEnabled(sample);
}

void SessionPanel::browse(QComboBox* box) {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Hugging Face model directory"));
  if (!dir.isEmpty()) box->setCurrentText(dir);
}

ModelSpec SessionPanel::modelSpec() const {
  ModelSpec spec;
  spec.target_dir = dirOf(target_dir_);
  spec.drafter_kind = static_cast<DrafterKind>(drafter_kind_->currentData().toInt());
  spec.drafter_dir = dirOf(drafter_dir_);
  spec.max_ngram = ngram_->value();
  spec.weights = weights_;
  return spec;
}

std::optional<SessionSpec> SessionPanel::sessionSpec(QString* error) const {
  SessionSpec spec;
  spec.prompt = prompt().toStdString();
  if (batch_lines_->isChecked()) {
    QStringList lines = prompt().split(QLatin1Char('\n'));
    lines.removeIf([](const QString& line) { return line.trimmed().isEmpty(); });
    if (lines.size() > SessionLimits::kMaxBatch) {
      if (error) *error = tr("%1 lines: a batch decodes at most %2 sequences together").arg(lines.size()).arg(SessionLimits::kMaxBatch);
      return std::nullopt;
    }
    if (!lines.isEmpty()) spec.prompt = lines.takeFirst().toStdString();
    for (const QString& line : lines) spec.more_prompts.push_back(line.toStdString());
  }
  SessionOptions& o = spec.options;
  o = options_;
  o.gamma = gamma_->value();
  o.adaptive_gamma = adaptive_->isChecked();
  o.draft_confidence = draft_confidence_->value();
  o.max_new_tokens = max_new_->value();
  o.sampling.greedy = sampling_->currentIndex() == 0;
  o.sampling.temperature = temperature_->value();
  o.sampling.top_k = top_k_->value();
  o.sampling.top_p = top_p_->value();
  o.seed = static_cast<uint64_t>(seed_->value());
  o.use_cache = use_cache_->isChecked();
  o.bookkeeping = bookkeeping_->currentIndex() == 0 ? Bookkeeping::Exact : Bookkeeping::Seed;
  o.ignore_eos = ignore_eos_->isChecked();
  o.fault = parseFault(fault_->currentData().toString().toStdString());
  if (needsBatch(o.fault) && spec.more_prompts.empty()) {
    if (error) {
      *error = tr("fault %1 acts on a batch: tick \"one sequence per line\" and write two or more prompts, one per line")
                   .arg(QString::fromUtf8(faultInfo(o.fault).name));
    }
    return std::nullopt;
  }
  try {
    o.eviction = evictionOfField();
    o.cache_layout = parseStorageLayout(cache_layout_->currentText().trimmed().toStdString());
    o.batch_layout = parseBatchLayout(batch_layout_->currentText().toStdString());
    o.validate();
  } catch (const Error& e) {
    if (error) *error = QString::fromStdString(e.what());
    return std::nullopt;
  }
  return spec;
}

void SessionPanel::setOptions(const SessionOptions& o) {
  options_ = o;
  gamma_->setValue(static_cast<int>(o.gamma));
  adaptive_->setChecked(o.adaptive_gamma);
  draft_confidence_->setValue(o.draft_confidence);
  max_new_->setValue(static_cast<int>(o.max_new_tokens));
  sampling_->setCurrentIndex(o.sampling.greedy ? 0 : 1);
  temperature_->setValue(o.sampling.temperature);
  top_k_->setValue(static_cast<int>(o.sampling.top_k));
  top_p_->setValue(o.sampling.top_p);
  seed_->setValue(static_cast<int>(std::min<uint64_t>(o.seed, SessionLimits::kMaxSeed)));
  use_cache_->setChecked(o.use_cache);
  bookkeeping_->setCurrentIndex(o.bookkeeping == Bookkeeping::Exact ? 0 : 1);
  ignore_eos_->setChecked(o.ignore_eos);
  selectFault(QString::fromUtf8(faultInfo(o.fault).name));
  eviction_->setText(o.eviction ? QString::fromStdString(o.eviction->describe()) : QString());
  cache_layout_->setCurrentText(QString::fromStdString(storageLayoutName(o.cache_layout)));
  batch_layout_->setCurrentText(QString::fromUtf8(batchLayoutName(o.batch_layout)));
}

void SessionPanel::setModelDirs(const QString& target_dir, const QString& drafter_dir) {
  target_dir_->setCurrentText(target_dir.isEmpty() ? kDefaultDir : target_dir);
  drafter_dir_->setCurrentText(drafter_dir.isEmpty() ? kDefaultDir : drafter_dir);
}

void SessionPanel::setPrompt(const QString& prompt) {
  // Beyond the display limit the box shows the prompt's beginning and end,
  // read-only (an edit of the elided text would lose the middle); Start
  // still runs the full prompt, and the context menu copies it.
  const QByteArray utf8 = prompt.toUtf8();
  const bool elide = static_cast<size_t>(utf8.size()) > kPromptShownBytes;
  full_prompt_ = elide ? prompt : QString();
  prompt_->setReadOnly(elide);
  prompt_->setToolTip(elide ? tr("The prompt is %L1 bytes, too long to show whole: the box holds its beginning and "
                                 "end. Right-click for \u201cCopy full prompt\u201d or \u201cClear prompt\u201d.")
                                  .arg(utf8.size())
                            : QString());
  prompt_->setPlainText(elide ? elidedForDisplay(std::string_view(utf8.constData(), static_cast<size_t>(utf8.size())),
                                                 kPromptShownBytes)
                              : prompt);
}

bool SessionPanel::promptElided() const { return !full_prompt_.isEmpty(); }

void SessionPanel::copyFullPrompt() const { QGuiApplication::clipboard()->setText(prompt()); }

void SessionPanel::showPromptMenu(const QPoint& at) {
  QMenu* menu = prompt_->createStandardContextMenu();
  menu->setAttribute(Qt::WA_DeleteOnClose);
  menu->addSeparator();
  QAction* copy = menu->addAction(tr("Copy full prompt"), this, &SessionPanel::copyFullPrompt);
  copy->setEnabled(promptElided());
  QAction* clear = menu->addAction(tr("Clear prompt"), this, [this] { setPrompt(QString()); });
  clear->setEnabled(promptElided());
  menu->popup(prompt_->viewport()->mapToGlobal(at));
}
void SessionPanel::setBusy(bool busy, const QString& what) {
  load_->setEnabled(!busy);
  start_->setEnabled(!busy);
  if (busy) {
    progress_->setRange(0, 0);  // indeterminate until a step count arrives
    progress_->setFormat(what);
  } else {
    progress_->setRange(0, 1);
    progress_->setValue(1);
    progress_->setFormat(tr("idle"));
  }
}

void SessionPanel::setProgress(int step, int total, const QString& what) {
  progress_->setRange(0, std::max(total, 1));
  progress_->setValue(step);
  progress_->setFormat(what.size() > 60 ? QStringLiteral("\u2026") + what.right(59) : what);
}

void SessionPanel::setLoadedModels(const QString& target_dir, const QString& drafter_name) {
  loaded_->setText(tr("loaded: %1 \u00b7 %2").arg(modelWithRole(tr("target"), target_dir), modelWithRole(tr("drafter"), drafter_name)));
}

void SessionPanel::rememberRecent(const QString& dir) {
  if (dir.isEmpty()) return;
  QSettings settings;
  QStringList recent = settings.value(QStringLiteral("recentModelDirs")).toStringList();
  recent.removeAll(dir);
  recent.prepend(dir);
  while (recent.size() > 8) recent.removeLast();
  settings.setValue(QStringLiteral("recentModelDirs"), recent);
  for (QComboBox* box : {target_dir_, drafter_dir_}) {
    if (box->findText(dir) < 0) box->addItem(dir);
  }
}

void SessionPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot) {
    metrics_->clear();
    return;
  }
  const Metrics& m = snapshot->metrics;
  metrics_->setText(tr("<b>%1</b> + <b>%2</b><br>%3%12<br>rounds %4 &middot; generated %5 &middot; drafted %6 &middot; "
                       "accepted %7<br>alpha %8 &middot; tokens/round %9 &middot; speedup (theory) %10%11")
                        .arg(elidedForDisplay(snapshot->target_name, kNameShownBytes).toHtmlEscaped(),
                             elidedForDisplay(snapshot->drafter_name, kNameShownBytes).toHtmlEscaped(),
                             elidedForDisplay(snapshot->options_summary, kNameShownBytes).toHtmlEscaped())
                        .arg(m.rounds)
                        .arg(m.generated)
                        .arg(m.drafted)
                        .arg(m.accepted)
                        .arg(m.alpha, 0, 'f', 3)
                        .arg(m.mean_accepted_length, 0, 'f', 2)
                        .arg(m.theoretical_speedup, 0, 'f', 2)
                        .arg(snapshot->finished ? tr("<br><b>finished</b>") : QString())
                        .arg(snapshot->fault == "none" ? QString()
                                                       : tr(", <b>fault: %1</b>").arg(elidedForDisplay(snapshot->fault, kNameShownBytes).toHtmlEscaped())));
}

}  // namespace kvscope::ui
