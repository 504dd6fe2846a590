#include "ui/windows/CompressionPanel.h"

#include <QComboBox>
#include <QEvent>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include <qcustomplot.h>

#include "ui/widgets/CompressionErrorPlot.h"
#include "ui/widgets/CompressionMetricsPlot.h"
#include "ui/widgets/CompressionSettingsForm.h"
#include "ui/widgets/CompressionSlotView.h"
#include "ui/widgets/LongText.h"
#include "ui/widgets/PickerItems.h"
#include "ui/widgets/SelfSpeculationView.h"

namespace kvscope::ui {

namespace {

const std::array<QString, CompressionPanel::kSlots> kSlotNames = {QStringLiteral("A"), QStringLiteral("B")};

// The slots' colours in every plot (A blue, B orange: apart for colour-blind eyes too).
QColor slotColor(int slot) { return slot == 0 ? QColor(31, 119, 180) : QColor(230, 120, 20); }

QScrollArea* scrolled(QWidget* content, bool horizontal) {
  auto* area = new QScrollArea;
  area->setWidget(content);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  if (!horizontal) area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  return area;
}

// Widths in text lines (the font's height), so presenter zoom moves the thresholds with the text.
constexpr int kFoldSettingsBelow = 64;  // the settings column folds away below this panel width
constexpr int kStackResultsBelow = 40;  // the results stack (A over B) below this width for them

QString number(double value, int digits = 4) { return QString::number(value, 'g', digits); }

QString kilobytes(int64_t bytes) { return QStringLiteral("%1 KB").arg(static_cast<double>(bytes) / 1024.0, 0, 'f', 0); }

QString share(double part, double whole) {
  return QStringLiteral("%1%").arg(whole > 0 ? 100.0 * part / whole : 0.0, 0, 'f', 0);
}

// The summary table's column of one slot, in the row order of fillTable.
QStringList summaryCells(const CompressionSummary& s) {
  const double triples = static_cast<double>(s.layers * s.kv_heads * s.rows);
  QString removed = QObject::tr("%1 (%2)").arg(s.rows_evicted).arg(share(static_cast<double>(s.rows_evicted), triples));
  if (s.rows_evicted_decoding > 0) removed += QObject::tr(" + %1 decoding").arg(s.rows_evicted_decoding);
  return {number(s.kl_mean, 3) + QStringLiteral(" / ") + number(s.kl_max, 2),
          share(s.top1_agreement, 1.0),
          number(s.attention_mass, 3),
          s.perplexity_full > 0 ? number(s.perplexity_full, 3) + QStringLiteral(" \u2192 ") + number(s.perplexity_compressed, 3)
                                : QObject::tr("(no scored step)"),
          removed,
          QStringLiteral("%1 / %2").arg(s.pruned_k).arg(s.pruned_v),
          QStringLiteral("%1, %2").arg(share(static_cast<double>(s.bytes_kept), static_cast<double>(s.bytes_full)),
                                        kilobytes(s.bytes_kept))};
}

}  // namespace

CompressionPanel::CompressionPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  setObjectName(QStringLiteral("compressionPanel"));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  settings_area_ = scrolled(buildSettings(), false);
  settings_area_->setObjectName(QStringLiteral("compressionSettings"));
  settings_area_->setMinimumWidth(230);
  settings_area_->setMaximumWidth(320);
  layout->addWidget(settings_area_);
  views_area_ = scrolled(buildViews(), true);
  views_area_->setObjectName(QStringLiteral("compressionResults"));
  layout->addWidget(views_area_, 1);
  for (int i = 0; i < kSlots; ++i) {
    connect(forms_[i], &CompressionSettingsForm::changed, this, [this, i] {
      tabs_->setTabText(i, kSlotNames[i] + QStringLiteral(": ") +
                               (forms_[i]->enabledSlot() ? forms_[i]->label() : tr("off")));
    });
    emit forms_[i]->changed();
  }
  forms_[1]->setPolicy(QStringLiteral("streaming"));  // a useful default pair: attention-based vs position-based
  relayout();
}

QWidget* CompressionPanel::buildSettings() {
  auto* box = new QWidget;
  tabs_ = new QTabWidget;
  tabs_->setObjectName(QStringLiteral("compressionSlots"));
  for (int i = 0; i < kSlots; ++i) {
    forms_[i] = new CompressionSettingsForm(kSlotNames[i], i > 0);
    tabs_->addTab(forms_[i], kSlotNames[i]);
  }
  max_new_ = new QSpinBox;
  max_new_->setObjectName(QStringLiteral("compressionMaxNew"));
  max_new_->setRange(0, 1024);
  max_new_->setValue(32);
  max_new_->setToolTip(tr("decode steps compared after the compression (greedy tokens of the full cache)"));
  gamma_ = new QSpinBox;
  gamma_->setObjectName(QStringLiteral("compressionSpeculateGamma"));
  gamma_->setRange(0, 16);
  gamma_->setValue(4);
  gamma_->setSpecialValueText(tr("off"));
  gamma_->setToolTip(tr("also let the target draft for itself over each slot's compressed cache, gamma tokens a "
                        "round, and verify over the full cache (the output stays the target's); off: 0"));
  values_box_ = new QComboBox;
  values_box_->addItems({QStringLiteral("K"), QStringLiteral("V")});
  values_box_->setToolTip(tr("draw the keys or the values of the compressed cache"));
  layer_box_ = new QComboBox;
  layer_box_->setObjectName(QStringLiteral("compressionLayer"));
  layer_box_->setToolTip(tr("layer (shared by every panel)"));
  head_box_ = new QComboBox;
  head_box_->setObjectName(QStringLiteral("compressionHead"));
  head_box_->setToolTip(tr("kv head (shared by every panel)"));
  run_ = new QPushButton(tr("Run A and B"));
  run_->setObjectName(QStringLiteral("compressionRun"));
  run_->setToolTip(tr("compress the session prompt's cache with each slot and compare every decode step with the "
                      "full cache"));
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("compressionStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* form = new QFormLayout;
  form->setContentsMargins(4, 0, 4, 0);
  form->addRow(tr("decode steps"), max_new_);
  form->addRow(tr("self-speculate \u03b3"), gamma_);
  form->addRow(tr("show"), values_box_);
  form->addRow(tr("layer"), layer_box_);
  form->addRow(tr("kv head"), head_box_);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(tabs_);
  layout->addLayout(form);
  layout->addWidget(run_);
  layout->addWidget(status_);
  layout->addStretch(1);

  connect(run_, &QPushButton::clicked, this, &CompressionPanel::runCompression);
  connect(values_box_, &QComboBox::currentIndexChanged, this, [this] { drawSlots(); });
  connect(layer_box_, &QComboBox::activated, this, [this](int layer) {
    this->context().setLayerHead(CacheRole::Target, layer, kv_head_);
  });
  connect(head_box_, &QComboBox::activated, this, [this](int head) {
    this->context().setLayerHead(CacheRole::Target, layer_, head);
  });
  return box;
}

QWidget* CompressionPanel::buildViews() {
  auto* box = new QWidget;
  for (int i = 0; i < kSlots; ++i) {
    views_[i] = new CompressionSlotView(kSlotNames[i]);
    spec_views_[i] = new SelfSpeculationView(kSlotNames[i]);
  }
  metrics_ = new CompressionMetricsPlot;
  error_plot_ = new CompressionErrorPlot;
  table_ = new QTableWidget(0, kSlots);
  table_->setObjectName(QStringLiteral("compressionSummary"));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  table_->installEventFilter(this);  // presenter zoom changes its font: fit the rows again
  // A and B equally wide, each wide enough for its numbers (fitTable sets the minimum width).
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setTextElideMode(Qt::ElideNone);
  table_->setWordWrap(false);
  auto* legend = new QLabel(tr("<span style='background:#c8c8c8'>&nbsp;&#9636;&#9636;&nbsp;</span> hatched: row "
                               "removed (attention no longer reads it) &nbsp; <b>white</b>: entry zeroed by pruning "
                               "&nbsp; <span style='color:#ffaa00'>&#9646;</span> selected kv head"));
  legend->setToolTip(tr("Left of each slot: the policy's score of every prefill row (one column per kv head, darker = "
                        "more worth keeping; the top 5% saturate). Right: the compressed cache's K or V of the "
                        "selected kv head."));
  legend->setWordWrap(true);
  legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

  // The legend's row: the settings' fold button, a small Run while they are folded away.
  settings_toggle_ = new QToolButton;
  settings_toggle_->setObjectName(QStringLiteral("compressionSettingsToggle"));
  settings_toggle_->setAutoRaise(true);
  connect(settings_toggle_, &QToolButton::clicked, this, [this] {
    user_collapsed_ = collapsed_ ? 0 : 1;
    relayout();
  });
  run_compact_ = new QToolButton;
  run_compact_->setObjectName(QStringLiteral("compressionRunCompact"));
  run_compact_->setText(tr("Run"));
  run_compact_->setToolTip(run_->toolTip());
  connect(run_compact_, &QToolButton::clicked, this, &CompressionPanel::runCompression);
  legend_ = new QWidget;
  auto* header = new QHBoxLayout(legend_);
  header->setContentsMargins(0, 0, 0, 0);
  header->addWidget(settings_toggle_);
  header->addWidget(run_compact_);
  header->addWidget(legend, 1);

  summary_box_ = new QWidget;
  auto* bottom_right = new QVBoxLayout(summary_box_);
  bottom_right->setContentsMargins(0, 0, 0, 0);
  bottom_right->addWidget(table_);
  bottom_right->addWidget(error_plot_, 1);
  grid_ = new QGridLayout(box);
  grid_->setContentsMargins(0, 0, 0, 0);
  grid_->setSpacing(4);
  arrangeResults(false);
  return box;
}

void CompressionPanel::arrangeResults(bool stacked) {
  if (arranged_ && stacked == stacked_) return;
  arranged_ = true;
  stacked_ = stacked;
  QWidget* parts[] = {legend_, views_[0], views_[1], metrics_, summary_box_, spec_views_[0], spec_views_[1]};
  constexpr int kParts = 7;
  for (QWidget* part : parts) grid_->removeWidget(part);
  for (int r = 0; r < kParts; ++r) grid_->setRowStretch(r, 0);
  if (stacked) {
    // One column: A over B (each as wide as the panel), then the metrics, the summary, the output error,
    // then A's and B's self-speculation.
    const int stretch[kParts] = {0, 3, 3, 2, 2, 3, 3};
    for (int r = 0; r < kParts; ++r) {
      grid_->addWidget(parts[r], r, 0);
      grid_->setRowStretch(r, stretch[r]);
    }
    grid_->setColumnStretch(1, 0);
  } else {
    grid_->addWidget(legend_, 0, 0, 1, 2);
    grid_->addWidget(views_[0], 1, 0);
    grid_->addWidget(views_[1], 1, 1);
    grid_->addWidget(metrics_, 2, 0);
    grid_->addWidget(summary_box_, 2, 1);
    grid_->addWidget(spec_views_[0], 3, 0);
    grid_->addWidget(spec_views_[1], 3, 1);
    grid_->setRowStretch(1, 3);
    grid_->setRowStretch(2, 2);
    grid_->setRowStretch(3, 3);
    grid_->setColumnStretch(1, 1);
  }
  grid_->setColumnStretch(0, 1);
}

void CompressionPanel::relayout() {
  const int line = fontMetrics().height();
  const int automatic = width() < kFoldSettingsBelow * line ? 1 : 0;
  if (automatic != auto_collapsed_) user_collapsed_ = -1;  // a new size class: the width decides again
  auto_collapsed_ = automatic;
  collapsed_ = (user_collapsed_ >= 0 ? user_collapsed_ : automatic) == 1;
  settings_area_->setVisible(!collapsed_);
  run_compact_->setVisible(collapsed_);
  settings_toggle_->setText(collapsed_ ? tr("\u25b8 settings") : QStringLiteral("\u25c2"));  // tooltip: what it does
  settings_toggle_->setToolTip(collapsed_ ? tr("show the slots' settings, the decode steps and the layer / head pickers")
                                          : tr("fold the settings away (more room for the results)"));
  // Plots as tall as their (zoomed) labels need; what does not fit the height scrolls.
  for (CompressionSlotView* view : views_) view->plot()->setMinimumHeight(std::max(200, 13 * line));
  for (SelfSpeculationView* view : spec_views_) view->plot()->setMinimumHeight(std::max(220, 15 * line));
  metrics_->setMinimumHeight(std::max(220, 16 * line));
  error_plot_->setMinimumHeight(std::max(150, 10 * line));
  const int settings = collapsed_ ? 0
                                  : std::clamp(settings_area_->sizeHint().width(), settings_area_->minimumWidth(),
                                               settings_area_->maximumWidth());
  arrangeResults(width() - settings < kStackResultsBelow * line);
}

void CompressionPanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  relayout();
}

void CompressionPanel::changeEvent(QEvent* event) {
  ViewerPanel::changeEvent(event);
  if (event->type() == QEvent::FontChange) relayout();  // presenter zoom
}

void CompressionPanel::scrollToSpeculation() {
  // After the pending layout (a dock resize, a new run's rows), where the views really are.
  QTimer::singleShot(0, this, [this] { views_area_->verticalScrollBar()->setValue(spec_views_[0]->y()); });
}

QString CompressionPanel::statusText() const { return status_->text(); }

void CompressionPanel::setStatus(const QString& text, bool error) {
  status_->setStyleSheet(error ? QStringLiteral("QLabel { color:#b00000; }") : QString());
  status_->setText(text);
  run_compact_->setToolTip(text.isEmpty() ? run_->toolTip() : text);
}

void CompressionPanel::setShowingValues(bool values) { values_box_->setCurrentIndex(values ? 1 : 0); }

bool CompressionPanel::applyShorthands(const QStringList& specs, QString* error) {
  if (specs.isEmpty() || specs.size() > kSlots) {
    if (error) *error = tr("give one or two POLICY:BUDGET settings, got %1").arg(specs.size());
    return false;
  }
  for (int i = 0; i < specs.size(); ++i) {
    if (!forms_[i]->applyShorthand(specs[i], error)) return false;
  }
  if (specs.size() == 1) forms_[1]->setEnabledSlot(false);
  return true;
}

bool CompressionPanel::promptTokens(std::vector<int64_t>* prompt, QString* why) const {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot || snapshot->replay_only) {
    *why = tr("no live session: load models (a replayed trace has no model to compress with)");
    return false;
  }
  const auto length = static_cast<size_t>(std::min<int64_t>(snapshot->prompt_length,
                                                             static_cast<int64_t>(snapshot->sequence.size())));
  prompt->assign(snapshot->sequence.begin(), snapshot->sequence.begin() + static_cast<std::ptrdiff_t>(length));
  return true;
}

void CompressionPanel::runCompression() {
  CompressionRequest request;
  QString why;
  if (!promptTokens(&request.prompt, &why)) {
    setStatus(why, true);
    return;
  }
  request.max_new = max_new_->value();
  request.speculate_gamma = gamma_->value();
  QStringList errors;
  for (int i = 0; i < kSlots; ++i) {
    form_errors_[i].clear();
    if (!forms_[i]->enabledSlot()) continue;
    CompressionSlotRequest slot;
    slot.slot = i;
    slot.label = forms_[i]->label().toStdString();
    QString error;
    if (forms_[i]->spec(&slot.spec, &error)) {
      request.settings.push_back(slot);
    } else {
      form_errors_[i] = error;
      errors << kSlotNames[i] + QStringLiteral(": ") + error;
    }
  }
  if (request.settings.empty()) {
    run_result_.reset();
    setStatus(errors.join(QLatin1Char('\n')), true);
    scheduleRefresh();
    return;
  }
  request.id = next_id_++;
  pending_id_ = request.id;
  run_prompt_ = request.prompt;
  QString text = tr("running on the session prompt (%1 tokens, %2 rows compressed)\u2026")
                     .arg(request.prompt.size())
                     .arg(request.prompt.empty() ? 0 : request.prompt.size() - 1);
  if (!errors.isEmpty()) text = errors.join(QLatin1Char('\n')) + QLatin1Char('\n') + text;
  setStatus(text, !errors.isEmpty());
  run_->setEnabled(false);
  run_compact_->setEnabled(false);
  emit compressRequested(request);
}

void CompressionPanel::showRun(CompressionRunPtr run) {
  if (!run || run->request.id != pending_id_) return;  // an answer to a request since replaced
  pending_id_ = 0;
  run_->setEnabled(true);
  run_compact_->setEnabled(true);
  run_result_ = std::move(run);
  QStringList errors, done;
  for (const CompressionSlotResult& slot : run_result_->results) {
    if (!slot.ok()) errors << QString::fromStdString(slot.label) + QStringLiteral(": ") + QString::fromStdString(slot.error);
    else done << QString::fromStdString(slot.label);
  }
  for (int i = 0; i < kSlots; ++i) {
    if (!form_errors_[i].isEmpty()) errors.prepend(kSlotNames[i] + QStringLiteral(": ") + form_errors_[i]);
  }
  QString text = done.isEmpty() ? QString()
                                : tr("%1 on the session prompt (%2 tokens, %3 decode steps)")
                                      .arg(done.join(QStringLiteral(" vs ")))
                                      .arg(run_result_->request.prompt.size())
                                      .arg(run_result_->request.max_new);
  if (!errors.isEmpty()) text = errors.join(QLatin1Char('\n')) + (text.isEmpty() ? QString() : QStringLiteral("\n") + text);
  setStatus(text, !errors.isEmpty());
  scheduleRefresh();
}

void CompressionPanel::showFailure(qint64 request_id, const QString& message) {
  if (request_id != pending_id_) return;
  pending_id_ = 0;
  run_->setEnabled(true);
  run_compact_->setEnabled(true);
  run_result_.reset();
  setStatus(message, true);
  scheduleRefresh();
}

void CompressionPanel::syncPickers() {
  const SessionSnapshot* snapshot = context().snapshot();
  const Cursor& cursor = context().cursor();
  // The lab runs on the target: follow the cursor while it is on the target cache.
  if (cursor.cache == CacheRole::Target) {
    layer_ = cursor.layer;
    kv_head_ = cursor.head;
  }
  const int layers = snapshot ? static_cast<int>(snapshot->target.layers) : 0;
  const int heads = snapshot ? static_cast<int>(snapshot->target.kv_heads) : 0;
  syncPickerItems(layer_box_, layers);
  syncPickerItems(head_box_, heads);
  const QSignalBlocker block_layer(layer_box_), block_head(head_box_);
  layer_box_->setCurrentIndex(static_cast<int>(layer_));
  head_box_->setCurrentIndex(static_cast<int>(kv_head_));
}

QString CompressionPanel::quotedToken(int64_t id) const {
  const SessionSnapshot* snapshot = context().snapshot();
  return snapshot ? QStringLiteral("'%1'").arg(elidedForDisplay(snapshot->tokenText(id), kTokenShownBytes)) : QString();
}

QString CompressionPanel::tokenText(int64_t position) const {
  if (position < 0 || position >= static_cast<int64_t>(run_prompt_.size())) return {};
  return quotedToken(run_prompt_[static_cast<size_t>(position)]);
}

const CompressionSlotResult* CompressionPanel::resultOf(int slot) const {
  if (!run_result_) return nullptr;
  for (size_t j = 0; j < run_result_->results.size() && j < run_result_->request.settings.size(); ++j) {
    if (run_result_->request.settings[j].slot == slot) return &run_result_->results[j];
  }
  return nullptr;
}

void CompressionPanel::drawSlots() {
  const bool values = values_box_->currentIndex() == 1;
  std::vector<CompressionMetricsPlot::Curve> curves;
  std::vector<CompressionErrorPlot::Slot> errors(kSlots);
  for (int i = 0; i < kSlots; ++i) {
    if (!form_errors_[i].isEmpty()) {  // refused before sending: the core's message, nothing drawn
      views_[i]->showMessage(forms_[i]->label(), form_errors_[i]);
      drawSpeculation(i, nullptr, values);  // no earlier run's self-speculation left standing as if current
      continue;
    }
    const CompressionSlotResult* slot = resultOf(i);
    drawSpeculation(i, slot, values);
    if (slot == nullptr) {
      views_[i]->showMessage(forms_[i]->enabledSlot() ? forms_[i]->label() : tr("off"),
                             pending() ? tr("running\u2026") : tr("not run yet: press Run"));
      continue;
    }
    const QString shown = QString::fromStdString(slot->label);
    if (!slot->ok()) {
      views_[i]->showMessage(shown, QString::fromStdString(slot->error));
      continue;
    }
    // Aliasing: the view keeps the whole run alive while it shows this slot.
    std::shared_ptr<const CompressionSummary> summary(run_result_, &slot->summary);
    views_[i]->showSlot(summary, shown, layer_, kv_head_, values, [this](int64_t p) { return tokenText(p); });
    curves.push_back({kSlotNames[i] + QLatin1Char(' ') + shown, slotColor(i), &slot->summary});
    errors[static_cast<size_t>(i)] = {kSlotNames[i] + QLatin1Char(' ') + shown, &slot->summary};
  }
  metrics_->setCurves(curves);
  error_plot_->setSlots(errors);
  fillTable();
}

QString CompressionPanel::sequenceTokenText(const SelfSpeculationResult& result, int64_t position) const {
  const auto prompt = static_cast<int64_t>(run_prompt_.size());
  if (position < prompt) return tokenText(position);
  const int64_t generated = position - prompt;
  if (generated >= static_cast<int64_t>(result.tokens.size())) return {};
  return quotedToken(result.tokens[static_cast<size_t>(generated)]);
}

void CompressionPanel::drawSpeculation(int slot, const CompressionSlotResult* result, bool values) {
  SelfSpeculationView* view = spec_views_[static_cast<size_t>(slot)];
  const QString label = forms_[slot]->enabledSlot() ? forms_[slot]->label() : tr("off");
  const bool asked = run_result_ ? run_result_->request.speculate_gamma > 0 : gamma_->value() > 0;
  view->setVisible(asked);
  if (!asked) return;
  if (!form_errors_[slot].isEmpty()) return view->showMessage(label, form_errors_[slot]);
  if (result == nullptr) {
    return view->showMessage(label, pending() ? tr("running\u2026") : tr("self-speculation not run yet: press Run"));
  }
  const QString shown = QString::fromStdString(result->label);
  if (!result->ok()) return view->showMessage(shown, QString::fromStdString(result->error));
  if (!result->speculation) {
    return view->showMessage(shown, tr("self-speculation refused: %1").arg(QString::fromStdString(result->speculation_error)));
  }
  const SpeculationSpeed speed{result->speculation_seconds, run_result_ ? run_result_->plain_seconds : 0.0};
  view->showResult(result->speculation, shown, layer_, kv_head_, values, speed,
                   [this, speculation = result->speculation](int64_t p) { return sequenceTokenText(*speculation, p); });
}

void CompressionPanel::fillTable() {
  const QStringList rows = {tr("KL mean / max (nats)"), tr("top-1 agreement"), tr("attention mass kept"),
                            tr("perplexity full \u2192 comp."), tr("rows removed (all)"), tr("K / V entries zeroed"),
                            tr("bytes kept"), tr("self-spec. alpha (rounds)"), tr("self-spec. speed / plain decoding")};
  table_->setRowCount(static_cast<int>(rows.size()));
  table_->setVerticalHeaderLabels(rows);
  QStringList headers;
  for (int i = 0; i < kSlots; ++i) {
    const CompressionSlotResult* slot = resultOf(i);
    headers << kSlotNames[i];  // the captions and the legend name the settings
    QStringList cells;
    for (int r = 0; r < rows.size(); ++r) cells << QStringLiteral("\u2013");
    if (slot && slot->ok()) {
      cells = summaryCells(slot->summary);
      cells << (slot->speculation ? QStringLiteral("%1 (%2)").arg(slot->speculation->alpha, 0, 'f', 2).arg(slot->speculation->rounds)
                                  : QStringLiteral("\u2013"));
      // Above 1: faster than the target decoding alone (plain time / self-speculation time).
      const double plain = run_result_ ? run_result_->plain_seconds : 0.0;
      cells << (slot->speculation && plain > 0 && slot->speculation_seconds > 0
                    ? QStringLiteral("%1x").arg(plain / slot->speculation_seconds, 0, 'f', 2)
                    : QStringLiteral("\u2013"));
    }
    for (int r = 0; r < static_cast<int>(cells.size()); ++r) {
      auto* item = new QTableWidgetItem(cells[r]);
      item->setForeground(slotColor(i).darker(130));
      table_->setItem(r, i, item);
    }
  }
  table_->setHorizontalHeaderLabels(headers);
  fitTable();
}

void CompressionPanel::fitTable() {
  // Every row shown without a scroll bar: the numbers are what the panel is read for.
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 4);
  const int height = table_->horizontalHeader()->sizeHint().height() + table_->verticalHeader()->length() +
                     2 * table_->frameWidth();
  table_->setFixedHeight(height);
  // Wide enough that no cell is elided: the row names plus two columns as wide as the widest cell.
  const auto* view = static_cast<const QAbstractItemView*>(table_);  // QTableView hides sizeHintForColumn
  int column = 0;
  for (int c = 0; c < table_->columnCount(); ++c) {
    column = std::max({column, view->sizeHintForColumn(c), table_->horizontalHeader()->sectionSizeHint(c)});
  }
  table_->setMinimumWidth(table_->verticalHeader()->sizeHint().width() + table_->columnCount() * (column + 2) +
                          2 * table_->frameWidth());
}

bool CompressionPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == table_ && event->type() == QEvent::FontChange) fitTable();
  return ViewerPanel::eventFilter(watched, event);
}

void CompressionPanel::refresh() {
  syncPickers();
  drawSlots();
}

}  // namespace kvscope::ui
