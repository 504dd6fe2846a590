#include "ui/windows/AttentionStepsPanel.h"

#include <QComboBox>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QStyle>
#include <QScrollBar>
#include <QTimer>
#include <QHash>
#include <QSignalBlocker>
#include <QFontMetrics>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/context/QueryTokens.h"
#include "ui/widgets/PickerItems.h"
#include "ui/widgets/StepBarPlot.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {

constexpr int kCardWidth = 300;  // a card's comfortable width: decides the number of columns

// 3-4 significant digits: what a projector can show and a student can read.
QString num(double x) {
  if (std::isinf(x)) return x < 0 ? QStringLiteral("\u2212\u221e") : QStringLiteral("\u221e");
  return QString::number(x, 'g', 4);
}

// The plots' two series, named in the card's text rather than in a legend
// that would cover bars.
QString seriesKey(const QString& before, const QString& after) {
  return QStringLiteral("<br><span style='color:%1'>&#9632;</span> %2 &nbsp; <span style='color:%3'>&#9632;</span> %4")
      .arg(StepBarPlot::beforeColor().name(), before, StepBarPlot::afterColor().name(), after);
}

QVector<double> doubles(const std::vector<float>& values) {
  QVector<double> out;
  out.reserve(static_cast<int>(values.size()));
  for (float v : values) out.push_back(std::isfinite(v) ? static_cast<double>(v) : std::nan(""));
  return out;
}

// "0.123, -0.456, ... (64 values)": the first values of a vector.
QString preview(const std::vector<float>& values, size_t shown = 6) {
  QStringList parts;
  for (size_t i = 0; i < std::min(shown, values.size()); ++i) parts << num(values[i]);
  QString text = QStringLiteral("[") + parts.join(QStringLiteral(", "));
  if (values.size() > shown) text += QStringLiteral(", \u2026");
  return text + QStringLiteral("] (%1 values)").arg(values.size());
}

double norm(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += static_cast<double>(v) * v;
  return std::sqrt(sum);
}

// "0-3, 7" -> {0, 1, 2, 3, 7}. False (and nothing) on anything else.
bool parseIndices(const QString& text, std::vector<int64_t>* out) {
  out->clear();
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QStringList range = part.trimmed().split(QLatin1Char('-'));
    bool ok_first = false, ok_last = false;
    const int64_t first = range.value(0).trimmed().toLongLong(&ok_first);
    const int64_t last = range.size() == 2 ? range[1].trimmed().toLongLong(&ok_last) : first;
    if (!ok_first || (range.size() == 2 && !ok_last) || range.size() > 2 || last < first || last - first > 100000) {
      return false;
    }
    for (int64_t i = first; i <= last; ++i) out->push_back(i);
  }
  return true;
}

}  // namespace

AttentionStepsPanel::AttentionStepsPanel(DebuggerContext& context, QWidget* parent) : ViewerPanel(context, parent) {
  layer_box_ = new QComboBox;
  layer_box_->setObjectName(QStringLiteral("stepsLayer"));
  layer_box_->setToolTip(tr("layer (shared by every panel)"));
  head_box_ = new QComboBox;
  head_box_->setObjectName(QStringLiteral("stepsHead"));
  head_box_->setToolTip(tr("query head; its kv head is shared by every panel"));
  auto* header = new QHBoxLayout;
  header->addWidget(new QLabel(tr("layer")));
  header->addWidget(layer_box_);
  header->addWidget(new QLabel(tr("query head")));
  header->addWidget(head_box_);
  header->addStretch(1);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("stepsStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  hidden_ = makeCard(QStringLiteral("stepsHidden"));
  query_ = makeCard(QStringLiteral("stepsQuery"));
  rotary_ = makeCard(QStringLiteral("stepsRotary"));
  scores_ = makeCard(QStringLiteral("stepsScores"));
  scaled_ = makeCard(QStringLiteral("stepsScaled"));
  capped_ = makeCard(QStringLiteral("stepsCapped"));
  masked_ = makeCard(QStringLiteral("stepsMasked"));
  weights_ = makeCard(QStringLiteral("stepsWeights"));
  output_ = makeCard(QStringLiteral("stepsOutput"));
  projection_ = makeCard(QStringLiteral("stepsProjection"));
  cards_ = {&hidden_, &query_, &rotary_, &scores_, &scaled_, &capped_, &masked_, &weights_, &output_, &projection_};
  what_if_box_ = buildWhatIfBox();
  capped_.frame->hide();  // shown for models that soft-cap their scores (Gemma 2)

  cards_widget_ = new QWidget;
  grid_ = new QGridLayout(cards_widget_);
  grid_->setContentsMargins(0, 0, 0, 0);
  grid_->setSpacing(6);
  auto* scroll = new QScrollArea;
  scroll_ = scroll;
  scroll->setWidget(cards_widget_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setFrameShape(QFrame::NoFrame);
  cards_widget_->installEventFilter(this);  // re-scroll to a lesson's step as the cards change size
  // The user scrolled (wheel, bar, keys): the view is theirs again.
  connect(scroll->verticalScrollBar(), &QScrollBar::actionTriggered, this, [this] { wanted_step_.clear(); });
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(header);
  layout->addWidget(status_);
  layout->addWidget(scroll, 1);
  relayout();
  clearShown(tr("no session yet"));

  connect(layer_box_, &QComboBox::currentIndexChanged, this, [this](int layer) {
    if (layer >= 0) this->context().setLayerHead(CacheRole::Target, layer, query_head_ / std::max(group_, 1));
  });
  connect(head_box_, &QComboBox::currentIndexChanged, this, [this](int head) {
    if (head >= 0) setQueryHead(head);
  });
}

AttentionStepsPanel::Card AttentionStepsPanel::makeCard(const QString& name) {
  Card card;
  // Owned by the panel until the grid takes it: a card relayout() leaves out
  // (the soft-cap card of a model without soft-capping) is still deleted.
  card.frame = new QFrame(this);
  card.frame->setObjectName(name);
  card.frame->setFrameShape(QFrame::StyledPanel);
  card.title = new QLabel;
  QFont bold = card.title->font();
  bold.setBold(true);
  card.title->setFont(bold);
  card.title->setWordWrap(true);
  card.text = new QLabel;
  card.text->setTextFormat(Qt::RichText);
  card.text->setWordWrap(true);
  card.text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  card.plot = new StepBarPlot(name + QStringLiteral("Plot"));
  auto* layout = new QVBoxLayout(card.frame);
  layout->setContentsMargins(6, 4, 6, 4);
  layout->setSpacing(2);
  layout->addWidget(card.title);
  layout->addWidget(card.text);
  layout->addWidget(card.plot);
  return card;
}

QWidget* AttentionStepsPanel::buildWhatIfBox() {
  auto* box = new QFrame;
  box->setObjectName(QStringLiteral("stepsWhatIf"));
  box->setFrameShape(QFrame::StyledPanel);
  auto* title = new QLabel(tr("What if these cache entries were gone?"));
  QFont bold = title->font();
  bold.setBold(true);
  title->setFont(bold);
  auto* hint = new QLabel(tr("Tick key rows, then Recompute: the token at P is fed again over layer L's cache with "
                             "those rows removed (or the channels below zeroed in them), so every later layer sees "
                             "the change too."));
  hint->setWordWrap(true);
  table_ = new QTableWidget;
  table_->setObjectName(QStringLiteral("stepsKeyTable"));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->verticalHeader()->setVisible(false);
  table_->setMinimumHeight(150);
  table_->installEventFilter(this);
  edit_mode_ = new QComboBox;
  edit_mode_->setObjectName(QStringLiteral("stepsEditMode"));
  edit_mode_->addItems({tr("remove the ticked rows"), tr("zero channels in the ticked rows (none ticked: every row)")});
  zero_k_ = new QLineEdit;
  zero_k_->setObjectName(QStringLiteral("stepsZeroK"));
  zero_k_->setPlaceholderText(tr("e.g. 0-3, 7"));
  zero_v_ = new QLineEdit;
  zero_v_->setObjectName(QStringLiteral("stepsZeroV"));
  zero_v_->setPlaceholderText(tr("e.g. 16-31"));
  recompute_ = new QPushButton(tr("Recompute"));
  recompute_->setObjectName(QStringLiteral("stepsRecompute"));
  what_if_result_ = new QLabel;
  what_if_result_->setObjectName(QStringLiteral("stepsWhatIfResult"));
  what_if_result_->setWordWrap(true);
  what_if_result_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* controls = what_if_controls_ = new QGridLayout;
  edit_label_ = new QLabel(tr("edit"));
  zero_k_label_ = new QLabel(tr("zero K channels"));
  zero_v_label_ = new QLabel(tr("zero V channels"));
  // A mode box that may shrink (its longest choice is a sentence): at 200%
  // it made the row wider than the panel and cut the button to "Reco".
  edit_mode_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  edit_mode_->setMinimumContentsLength(12);
  placeWhatIfControls(false);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(6, 4, 6, 4);
  layout->addWidget(title);
  layout->addWidget(hint);
  layout->addLayout(controls);
  layout->addWidget(what_if_result_);
  layout->addWidget(table_, 1);
  connect(recompute_, &QPushButton::clicked, this, &AttentionStepsPanel::recompute);
  // A tick or untick moves the what-if marks in the KV view.
  connect(table_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
    if (item->column() == 0) publishFocus();
  });
  return box;
}

QWidget* AttentionStepsPanel::stepWidget(const QString& step) const {
  const QHash<QString, const Card*> cards = {
      {"hidden", &hidden_},   {"query", &query_},   {"rotary", &rotary_},   {"scores", &scores_},
      {"scaled", &scaled_},   {"masked", &masked_}, {"weights", &weights_}, {"output", &output_},
      {"projection", &projection_}};
  if (step == QStringLiteral("what-if")) return what_if_box_;
  const Card* card = cards.value(step);
  return card && !card->frame->isHidden() ? card->frame : nullptr;
}

void AttentionStepsPanel::showStep(const QString& step) {
  const bool first = wanted_step_ != step;
  wanted_step_ = step;
  QWidget* widget = stepWidget(step);
  if (!widget) return;
  // A little of what precedes stays in view: the eye sees where the step sits.
  const int top = widget->mapTo(cards_widget_, QPoint(0, 0)).y();
  scroll_->verticalScrollBar()->setValue(std::max(0, top - 4));
  if (!first) return;
  // Cards still settling (a table filled, a plot laid out) move the step: again once they did.
  for (int delay : {50, 150, 400}) {
    QTimer::singleShot(delay, this, [this, step] {
      if (wanted_step_ == step) showStep(step);
    });
  }
}

bool AttentionStepsPanel::eventFilter(QObject* watched, QEvent* event) {
  // The table's rows and columns are sized once, from the font of the time:
  // a zoom in and back out would leave them at the larger size.
  if (watched == table_ && event->type() == QEvent::FontChange) {
    fitTableToFont();
    QTimer::singleShot(0, this, &AttentionStepsPanel::fitWhatIfControls);  // a zoom's wider controls
  }
  if (watched == cards_widget_ && !wanted_step_.isEmpty() &&
      (event->type() == QEvent::Resize || event->type() == QEvent::LayoutRequest)) {
    const QString step = wanted_step_;
    QTimer::singleShot(0, this, [this, step] {
      if (wanted_step_ == step) showStep(step);
    });
  }
  return ViewerPanel::eventFilter(watched, event);
}

void AttentionStepsPanel::resizeEvent(QResizeEvent* event) {
  ViewerPanel::resizeEvent(event);
  relayout();
}

void AttentionStepsPanel::placeWhatIfControls(bool stacked) {
  // Side by side: edit mode over the two channel boxes, Recompute beside them. Stacked
  // (a narrow stage at 200%): one control per row, Recompute under them, nothing cut.
  QGridLayout* controls = what_if_controls_;
  for (QWidget* w : std::initializer_list<QWidget*>{edit_label_, edit_mode_, zero_k_label_, zero_k_, zero_v_label_, zero_v_, recompute_}) {
    controls->removeWidget(w);
  }
  for (int c = 0; c < 5; ++c) controls->setColumnStretch(c, 0);
  controls->addWidget(edit_label_, 0, 0);
  if (stacked) {
    controls->addWidget(edit_mode_, 0, 1);
    controls->addWidget(zero_k_label_, 1, 0);
    controls->addWidget(zero_k_, 1, 1);
    controls->addWidget(zero_v_label_, 2, 0);
    controls->addWidget(zero_v_, 2, 1);
    controls->addWidget(recompute_, 3, 0, 1, 2, Qt::AlignLeft);
    controls->setColumnStretch(1, 1);
  } else {
    controls->addWidget(edit_mode_, 0, 1, 1, 3);
    controls->addWidget(zero_k_label_, 1, 0);
    controls->addWidget(zero_k_, 1, 1);
    controls->addWidget(zero_v_label_, 1, 2);
    controls->addWidget(zero_v_, 1, 3);
    controls->addWidget(recompute_, 0, 4, 2, 1);
    controls->setColumnStretch(1, 1);
    controls->setColumnStretch(3, 1);
  }
  what_if_stacked_ = stacked;
}

void AttentionStepsPanel::fitWhatIfControls() {
  // The side-by-side row's least width at this font: both channel labels and boxes, and the button.
  const int spacing = std::max(0, what_if_controls_->horizontalSpacing());
  const int row = zero_k_label_->sizeHint().width() + zero_k_->minimumSizeHint().width() + zero_v_label_->sizeHint().width() +
                  zero_v_->minimumSizeHint().width() + recompute_->sizeHint().width() + 6 * spacing + 24;
  const bool stacked = row > width() - 2 * style()->pixelMetric(QStyle::PM_ScrollBarExtent);
  if (stacked != what_if_stacked_) placeWhatIfControls(stacked);
}

void AttentionStepsPanel::relayout() {
  fitWhatIfControls();
  // As many columns of cards as fit; the what-if box spans them all.
  const int columns = std::clamp(width() / kCardWidth, 1, 3);
  if (columns == columns_) return;
  columns_ = columns;
  for (Card* card : cards_) grid_->removeWidget(card->frame);
  grid_->removeWidget(what_if_box_);
  int i = 0;
  for (Card* card : cards_) {
    const bool capped = explanation_ && explanation_->softcap > 0;
    if (card == &capped_ && !capped) continue;  // no soft-cap: no empty cell
    grid_->addWidget(card->frame, i / columns, i % columns);
    ++i;
  }
  grid_->addWidget(what_if_box_, (i + columns - 1) / columns, 0, 1, columns);
  for (int c = 0; c < 3; ++c) grid_->setColumnStretch(c, c < columns ? 1 : 0);
}

void AttentionStepsPanel::setQueryHead(int head) {
  const SessionSnapshot* snapshot = context().snapshot();
  if (snapshot && snapshot->target.heads > 0 && snapshot->target.kv_heads > 0) {
    group_ = static_cast<int>(std::max<int64_t>(1, snapshot->target.heads / snapshot->target.kv_heads));
  }
  query_head_ = std::max(0, head);
  context().setLayerHead(CacheRole::Target, context().cursor().layer, query_head_ / std::max(group_, 1));
  scheduleRefresh();
}

void AttentionStepsPanel::updateSelectors(const SessionSnapshot& snapshot, const Cursor& cursor) {
  const int layers = static_cast<int>(snapshot.target.layers);
  const int heads = static_cast<int>(std::max<int64_t>(snapshot.target.heads, 1));
  const int kv_heads = static_cast<int>(std::max<int64_t>(snapshot.target.kv_heads, 1));
  group_ = std::max(1, heads / kv_heads);
  const int kv_head = static_cast<int>(std::clamp<int64_t>(cursor.head, 0, kv_heads - 1));
  query_head_ = queryHeadInGroup(query_head_, kv_head, group_, heads);
  const QSignalBlocker block_layers(layer_box_), block_heads(head_box_);
  syncPickerItems(layer_box_, layers);
  syncPickerItems(head_box_, heads, [this](int i) { return tr("%1 (kv %2)").arg(i).arg(i / group_); });
  layer_box_->setCurrentIndex(static_cast<int>(std::clamp<int64_t>(cursor.layer, 0, std::max(layers - 1, 0))));
  head_box_->setCurrentIndex(query_head_);
}

bool AttentionStepsPanel::requestFor(const SessionSnapshot& snapshot, const Cursor& cursor, ExplainRequest* out,
                                     QString* why) {
  if (!cursor.valid() || !snapshot.target.present || snapshot.target.layers == 0) {
    *why = tr("no session yet");
    return false;
  }
  std::vector<int64_t> ids = tokensAt(snapshot, cursor.moment());
  if (ids.empty()) {
    *why = tr("no tokens at this moment");
    return false;
  }
  // The selected position, else the newest token: the query that would be fed next.
  const int64_t last = static_cast<int64_t>(ids.size()) - 1;
  const int64_t position = cursor.position >= 0 && cursor.position <= last ? cursor.position : last;
  ids.resize(static_cast<size_t>(position + 1));
  out->ids = std::move(ids);
  out->layer = std::clamp<int64_t>(cursor.layer, 0, snapshot.target.layers - 1);
  out->head = query_head_;
  out->position = position;
  return true;
}

void AttentionStepsPanel::refresh() {
  const SessionSnapshot* snapshot = context().snapshot();
  if (!snapshot) {
    request_ = {};
    clearShown(tr("no session yet"));
    return;
  }
  updateSelectors(*snapshot, context().cursor());
  ExplainRequest request;
  QString why;
  if (!requestFor(*snapshot, context().cursor(), &request, &why)) {
    request_ = {};
    clearShown(why);
    return;
  }
  const std::string source = (snapshot->replay_only ? "replay of " : "session of ") + snapshot->target_name;
  if (request.sameQuery(request_) && source == request_source_ && (pending_ || explanation_)) return;  // shown or on its way
  request_ = request;
  request_source_ = source;
  pending_ = true;
  what_if_pending_ = false;
  what_if_.reset();
  context().clearAttentionFocus();  // until this query's explanation arrives
  status_->setText(tr("computing layer %1, head %2, position %3\u2026").arg(request.layer).arg(request.head).arg(request.position));
  emit explainRequested(request, false);
}

void AttentionStepsPanel::clearShown(const QString& why) {
  pending_ = false;
  explanation_.reset();
  context().clearAttentionFocus();
  what_if_.reset();
  status_->setText(why);
  for (Card* card : cards_) {
    card->title->clear();
    card->text->clear();
    card->plot->setValues({}, {});
  }
  table_->setRowCount(0);
  what_if_result_->clear();
  recompute_->setEnabled(false);
}

void AttentionStepsPanel::showExplanation(ExplanationPtr explanation) {
  if (!explanation || !explanation->request.sameQuery(request_)) return;  // a query the cursor has left
  pending_ = false;
  explanation_ = std::move(explanation);
  what_if_.reset();
  drawSteps();
}

void AttentionStepsPanel::showWhatIf(WhatIfPtr result) {
  if (!result || !explanation_ || !result->request.sameQuery(request_)) return;
  what_if_pending_ = false;
  what_if_ = std::move(result);
  drawResults();
}

void AttentionStepsPanel::showFailure(const QString& message) {
  // A failed edit leaves the explanation standing; a failed explanation replaces the status.
  const QString text = QStringLiteral("<span style='color:#c00'>%1</span>").arg(message.toHtmlEscaped());
  if (what_if_pending_) {
    what_if_pending_ = false;
    what_if_result_->setText(text);
    return;
  }
  // Nothing of an earlier query stays drawn beside the error (it would read as this query's).
  clearShown(text);
}

QString AttentionStepsPanel::tokenText(int64_t id) const {
  const SessionSnapshot* snapshot = context().snapshot();
  return snapshot ? displayToken(snapshot->tokenText(id)) : QString::number(id);
}

QStringList AttentionStepsPanel::keyLabels() const {
  QStringList labels;
  for (size_t j = 0; j < request_.ids.size(); ++j) {
    labels << QStringLiteral("%1 '%2'").arg(j).arg(tokenText(request_.ids[j]));
  }
  return labels;
}

void AttentionStepsPanel::drawSteps() {
  const AttentionExplanation& e = *explanation_;
  const int64_t P = e.request.position;
  QStringList sharing;
  for (int64_t h : e.query_heads_sharing) sharing << QString::number(h);
  // One multi-argument arg(): a token's text may itself contain "%5".
  status_->setText(
      tr("<b>Layer %1, query head %2, position %3 '%4'</b> of the target. Explained over the session's tokens 0..%3 "
         "at this moment, as one uncached prefill (the numbers are the model's own; max |difference| from its forward "
         "%5). Head %2 reads kv head %6, shared by query heads %7%8.")
          .arg(QString::number(e.request.layer), QString::number(e.request.head), QString::number(P),
               tokenText(e.request.ids.back()).toHtmlEscaped(), num(e.model_difference), QString::number(e.kv_head),
               sharing.join(QStringLiteral(", ")),
               e.query_heads_sharing.size() > 1 ? tr(" (grouped-query attention: they all read the same K and V rows)")
                                                : QString()) +
      (context().snapshot() && context().snapshot()->replay_only
           ? (context().snapshot()->from_capture
                  ? tr(" <i>A capture keeps no weights: explained with the loaded target, the checkpoint the capture "
                       "names.</i>")
                  : tr(" <i>A replayed trace keeps no weights: explained with the loaded target, which has the trace's "
                       "name and shape.</i>"))
           : QString()));
  drawVectors();
  drawKeySteps();
  drawProjection();
  fillTable();
  what_if_result_->setText(P == 0 ? tr("Position 0 has no earlier rows to remove: select a later token.")
                                  : tr("Nothing edited yet."));
  recompute_->setEnabled(P > 0);
  columns_ = 0;  // the soft-cap card may have appeared or gone
  relayout();
  publishFocus();
}

std::vector<int64_t> AttentionStepsPanel::tickedPositions() const {
  std::vector<int64_t> ticked;
  for (int j = 0; j < table_->rowCount(); ++j) {
    const QTableWidgetItem* tick = table_->item(j, 0);
    if (tick && (tick->flags() & Qt::ItemIsUserCheckable) && tick->checkState() == Qt::Checked) ticked.push_back(j);
  }
  return ticked;
}

// The rows this query reads, for the KV view (through the shared context):
// the explanation's key rows 0..P of its layer and kv head, its own row, and
// the rows ticked in the what-if box (table row j is position j).
void AttentionStepsPanel::setOnScreen(bool on_screen) {
  if (on_screen == on_screen_) return;
  on_screen_ = on_screen;
  if (on_screen_) publishFocus();
  else context().clearAttentionFocus();
}

void AttentionStepsPanel::publishFocus() {
  if (!explanation_ || !on_screen_) return;
  const AttentionExplanation& e = *explanation_;
  AttentionFocus focus;
  focus.active = true;
  focus.layer = e.request.layer;
  focus.kv_head = e.kv_head;
  focus.query_position = e.request.position;
  for (int64_t j = 0; j < e.keyCount(); ++j) focus.key_positions.push_back(j);
  focus.ticked_positions = tickedPositions();
  context().setAttentionFocus(std::move(focus));
}

QString AttentionStepsPanel::rotaryText() const { return rotary_.title->text() + QLatin1Char(' ') + rotary_.text->text(); }
QString AttentionStepsPanel::statusText() const { return status_->text(); }
QString AttentionStepsPanel::projectionText() const {
  return projection_.title->text() + QLatin1Char(' ') + projection_.text->text();
}
QString AttentionStepsPanel::whatIfText() const { return what_if_result_->text(); }

void AttentionStepsPanel::drawVectors() {
  const AttentionExplanation& e = *explanation_;
  const int64_t P = e.request.position;
  hidden_.title->setText(tr("1. Hidden state entering layer %1 (after its norm)").arg(e.request.layer));
  hidden_.text->setText(tr("|h| = %1 &nbsp; %2").arg(num(e.hidden_norm), preview(e.hidden)));
  hidden_.plot->setKeyLabels({}, tr("channel"));
  hidden_.plot->setValues(doubles(e.hidden), tr("h"));

  query_.title->setText(e.rotary ? tr("2. q = h \u00b7 W_q of head %1, before and after the rotary embedding").arg(e.request.head)
                                 : tr("2. q = h \u00b7 W_q of head %1").arg(e.request.head));
  query_.text->setText(tr("|q| = %1 &nbsp; %2").arg(num(norm(e.q)), preview(e.q)) +
                       (e.rotary ? seriesKey(tr("before"), tr("after the rotary embedding")) : QString()));
  query_.plot->setKeyLabels({}, tr("channel of head %1").arg(e.request.head));
  if (e.rotary) {
    query_.plot->setValues(doubles(e.q_before_rope), tr("before"), doubles(e.q), tr("after rotary"));
  } else {
    query_.plot->setValues(doubles(e.q), tr("q"));
  }

  rotary_.plot->setKeyLabels({}, tr("channel pair (i, i + %1)").arg(e.head_dim / 2));
  if (e.rotary) {
    rotary_.title->setText(tr("3. Rotary embedding: each channel pair turns by an angle set by the position"));
    QString text = tr("At position %1, channel i turns with channel i + %2 by %1 \u00d7 \u03b8<sub>i</sub> radians: "
                      "fast pairs first, slow ones last. %3")
                       .arg(P)
                       .arg(e.head_dim / 2)
                       .arg(preview(e.angle, 4));
    if (e.rotary_magnitude != 1.0) text += tr(" (longrope: cos/sin scaled by %1)").arg(num(e.rotary_magnitude));
    rotary_.text->setText(text);
    rotary_.plot->setValues(doubles(e.angle), tr("angle"));
    rotary_.plot->show();
  } else {
    const QString model = e.architecture.rfind("GPT2", 0) == 0 ? QStringLiteral("GPT-2")
                                                               : QString::fromStdString(e.architecture);
    rotary_.title->setText(tr("3. %1: no rotary embedding").arg(model));
    rotary_.text->setText(tr("Positions were added to the input as learned embeddings, so q and k are used as they "
                             "come out of the projection: nothing turns."));
    rotary_.plot->setValues({}, {});
    rotary_.plot->hide();
  }

  output_.title->setText(tr("8. Output = \u03a3 weight<sub>j</sub> \u00b7 v<sub>j</sub> (then o_proj: 9)"));
  output_.text->setText(tr("|o| = %1 &nbsp; %2").arg(num(norm(e.output)), preview(e.output)));
  output_.plot->setKeyLabels({}, tr("channel"));
  output_.plot->setValues(doubles(e.output), tr("before"));
}

void AttentionStepsPanel::drawKeySteps() {
  const AttentionExplanation& e = *explanation_;
  const int64_t T = e.keyCount(), P = e.request.position;
  const QStringList labels = keyLabels();
  const QString axis = tr("key row: position 'token' (kv head %1)").arg(e.kv_head);
  for (Card* card : {&scores_, &scaled_, &capped_, &masked_, &weights_}) {
    card->plot->setKeyLabels(labels, axis);
    card->plot->setHighlight(static_cast<int>(P));
  }
  const auto best = std::max_element(e.scores.begin(), e.scores.end()) - e.scores.begin();
  scores_.title->setText(tr("4. Scores q \u00b7 k<sub>j</sub> against the %1 key rows").arg(T));
  scores_.text->setText(tr("largest %1 at %2 (the shaded bar is the query's own row)").arg(num(e.scores[best])).arg(labels.value(static_cast<int>(best)).toHtmlEscaped()));
  scores_.plot->setValues(doubles(e.scores), tr("q\u00b7k"));

  const double root = 1.0 / (e.scale * e.scale);
  const bool head_dim_root = std::abs(root - static_cast<double>(e.head_dim)) < 1e-6;
  scaled_.title->setText(tr("5. Scaled \u00d7 %1 = 1/\u221a%2").arg(num(e.scale)).arg(num(root)));
  scaled_.text->setText(head_dim_root ? tr("1/\u221ahead_dim keeps the scores' spread near 1 whatever the head size.")
                                      : tr("This model sets its own factor (not 1/\u221ahead_dim)."));
  scaled_.plot->setValues(doubles(e.scaled), tr("scaled"));

  capped_.frame->setVisible(e.softcap > 0);
  capped_.title->setText(tr("5b. Soft-capped: %1 \u00b7 tanh(x / %1)").arg(num(e.softcap)));
  capped_.text->setText(tr("Gemma 2 bounds the scores to \u00b1%1 before the mask.").arg(num(e.softcap)));
  capped_.plot->setValues(doubles(e.capped), tr("capped"));

  int64_t hidden = 0;
  for (uint8_t v : e.visible) hidden += v ? 0 : 1;
  masked_.title->setText(tr("6. Masked: keys the query may not see become \u2212\u221e"));
  QString mask = e.window > 0 ? tr("Sliding window of %1 keys: ").arg(e.window) : tr("Causal mask: ");
  mask += hidden == 0 ? tr("the query at %1 sees every key 0..%1; later tokens are not in the sequence yet.").arg(P)
                      : tr("%1 keys hidden (no bar), %2 visible.").arg(hidden).arg(T - hidden);
  masked_.text->setText(mask);
  masked_.plot->setValues(doubles(e.masked), tr("masked"));

  const int top = static_cast<int>(std::max_element(e.weights.begin(), e.weights.end()) - e.weights.begin());
  weights_.title->setText(tr("7. Softmax \u2192 attention weights (they sum to 1)"));
  weights_.text->setText(tr("weight<sub>j</sub> = exp(x<sub>j</sub>) / \u03a3 exp(x); most weight %1 on %2")
                             .arg(num(e.weights[static_cast<size_t>(top)]))
                             .arg(labels.value(top).toHtmlEscaped()));
  weights_.plot->setValues(doubles(e.weights), tr("before"));
}

// o_proj reads every head's output side by side: head H's share is its
// output times the columns H*D..(H+1)*D-1 of the weight; the layer's
// attention output is the sum of the shares plus the bias.
void AttentionStepsPanel::drawProjection() {
  const AttentionExplanation& e = *explanation_;
  const int64_t H = e.request.head, D = e.head_dim;
  const auto hidden = static_cast<int64_t>(e.projected.size());
  const bool has_bias = std::any_of(e.o_proj_bias.begin(), e.o_proj_bias.end(), [](float b) { return b != 0.0f; });
  projection_.title->setText(tr("9. Through o_proj: head %1's share of the layer's attention output").arg(H));
  projection_.text->setText(
      tr("o_proj maps all %1 heads' outputs side by side ([%1 \u00d7 %2]) to the hidden size %3: head %4's share is "
         "o \u00b7 its columns %5\u2013%6 of the weight ([%3 \u00d7 %2]). |share| = %7 &nbsp; %8<br>"
         "The layer's attention output = \u03a3 shares%11, |out| = %9, before the residual add; "
         "max |difference| from the model's forward %10.")
          .arg(QString::number(e.num_heads), QString::number(D), QString::number(hidden), QString::number(H),
               QString::number(H * D), QString::number((H + 1) * D - 1), num(norm(e.head_contribution)),
               preview(e.head_contribution), num(norm(e.projected)))
          .arg(num(e.projection_difference), has_bias ? tr(" + bias") : tr(" (this layer has no bias)")) +
      seriesKey(tr("head %1's share").arg(H), has_bias ? tr("all heads + bias") : tr("all heads")));
  projection_.plot->setKeyLabels({}, tr("hidden channel"));
  projection_.plot->setValues(doubles(e.head_contribution), tr("head %1").arg(H), doubles(e.projected),
                              tr("all heads"));
}

void AttentionStepsPanel::fillTable() {
  const AttentionExplanation& e = *explanation_;
  const QStringList headers = {tr("remove"), tr("pos"), tr("token"), tr("q\u00b7k"), tr("scaled"), tr("masked"),
                               tr("weight"), tr("weight after")};
  table_->clear();
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(e.keyCount()));
  for (int j = 0; j < e.keyCount(); ++j) {
    auto* tick = new QTableWidgetItem;
    const bool own = j == e.request.position;  // written by the query's own forward: cannot be removed before it
    tick->setFlags(own ? Qt::ItemIsEnabled : Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    if (!own) tick->setCheckState(Qt::Unchecked);
    tick->setToolTip(own ? tr("the query's own row: written by this forward") : tr("tick to remove or zero this row"));
    table_->setItem(j, 0, tick);
    const QStringList cells = {QString::number(j), QStringLiteral("'%1'").arg(tokenText(e.request.ids[static_cast<size_t>(j)])),
                               num(e.scores[j]), num(e.softcap > 0 ? e.capped[j] : e.scaled[j]), num(e.masked[j]),
                               num(e.weights[j]), QString()};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(c == 1 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(j, c + 1, item);
    }
  }
  if (e.softcap > 0) table_->horizontalHeaderItem(4)->setText(tr("capped"));
  fitTableToFont();
  table_->horizontalHeader()->setStretchLastSection(true);
}

void AttentionStepsPanel::fitTableToFont() {
  table_->verticalHeader()->setDefaultSectionSize(QFontMetrics(table_->font()).height() + 6);
  table_->resizeColumnsToContents();
}

void AttentionStepsPanel::setRemoved(int64_t position, bool removed) {
  if (QTableWidgetItem* tick = table_->item(static_cast<int>(position), 0); tick && (tick->flags() & Qt::ItemIsUserCheckable)) {
    tick->setCheckState(removed ? Qt::Checked : Qt::Unchecked);
  }
}

void AttentionStepsPanel::recompute() {
  if (!explanation_) return;
  ExplainRequest request = explanation_->request;
  const std::vector<int64_t> ticked = tickedPositions();
  if (!parseIndices(zero_k_->text(), &request.zero_key_channels) ||
      !parseIndices(zero_v_->text(), &request.zero_value_channels)) {
    what_if_result_->setText(tr("<span style='color:#c00'>channels: write numbers and ranges, e.g. 0-3, 7</span>"));
    return;
  }
  if (edit_mode_->currentIndex() == 0) {
    request.remove_positions = ticked;
  } else {
    request.zero_positions = ticked;
  }
  if (!request.hasEdit()) {
    what_if_result_->setText(tr("Nothing to recompute: tick rows to remove, or name channels to zero."));
    return;
  }
  what_if_result_->setText(tr("recomputing\u2026"));
  what_if_pending_ = true;
  emit explainRequested(request, true);
}

void AttentionStepsPanel::drawResults() {
  const WhatIfExplanation& w = *what_if_;
  weights_.plot->setValues(doubles(w.weights_before), tr("before"), doubles(w.weights_after), tr("after"));
  for (Card* card : {&weights_, &output_}) {
    if (!card->text->text().contains(QStringLiteral("&#9632;"))) {  // once: drawSteps resets the text
      card->text->setText(card->text->text() + seriesKey(tr("before"), tr("after the edit")));
    }
  }
  output_.plot->setValues(doubles(w.output_before), tr("before"), doubles(w.output_after), tr("after"));
  for (int j = 0; j < table_->rowCount() && j < static_cast<int>(w.weights_after.size()); ++j) {
    const bool removed = j < static_cast<int>(w.removed.size()) && w.removed[static_cast<size_t>(j)];
    table_->item(j, 7)->setText(removed ? tr("removed") : num(w.weights_after[static_cast<size_t>(j)]));
  }
  QStringList edit;
  const auto list = [](const std::vector<int64_t>& v) {
    QStringList parts;
    for (int64_t x : v) parts << QString::number(x);
    return parts.join(QStringLiteral(", "));
  };
  if (!w.request.remove_positions.empty()) edit << tr("removed rows %1").arg(list(w.request.remove_positions));
  if (!w.request.zero_key_channels.empty()) edit << tr("zeroed K channels %1").arg(list(w.request.zero_key_channels));
  if (!w.request.zero_value_channels.empty()) edit << tr("zeroed V channels %1").arg(list(w.request.zero_value_channels));
  const bool same = w.top1_before == w.top1_after;
  what_if_result_->setText(
      tr("<b>%1</b> in layer %2. Next-token distribution: KL(before\u2016after) = <b>%3</b> nats; top-1 before '%4' "
         "(p %5 \u2192 %6), after '%7' (p %8)%9.")
          .arg(edit.join(QStringLiteral("; ")).toHtmlEscaped(), QString::number(w.request.layer), num(w.kl),
               tokenText(w.top1_before).toHtmlEscaped(), num(w.top1_before_p_before), num(w.top1_before_p_after),
               tokenText(w.top1_after).toHtmlEscaped(), num(w.top1_after_p_after),
               (same ? tr(": unchanged") : tr(": <span style='color:#c00'><b>changed</b></span>")) +
                   tr(". Max |\u0394 logit| %1").arg(num(w.max_logit_difference))));
}

}  // namespace kvscope::ui
