#include "ui/widgets/CompressionSettingsForm.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QSpinBox>
#include <QStringList>

#include <exception>

#include "core/cache/eviction_policy_table.h"
#include "core/error.h"

namespace kvscope::ui {

namespace {

const QString kNoPolicy = QStringLiteral("none");
const QString kNoPruning = QStringLiteral("off");
constexpr int kMaxRows = 1000000;

// Ranges wider than the valid ones on purpose: the core says what is wrong.
QDoubleSpinBox* fractionBox(double value, const QString& tip) {
  auto* box = new QDoubleSpinBox;
  box->setRange(0.0, 2.0);
  box->setSingleStep(0.05);
  box->setDecimals(2);
  box->setValue(value);
  box->setToolTip(tip);
  return box;
}

QSpinBox* countBox(int low, int value, const QString& tip) {
  auto* box = new QSpinBox;
  box->setRange(low, kMaxRows);
  box->setValue(value);
  box->setToolTip(tip);
  return box;
}

QString percent(double fraction) { return QStringLiteral("%1%").arg(qRound(fraction * 100)); }

}  // namespace

CompressionSettingsForm::CompressionSettingsForm(const QString& slot, bool optional, QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("compressionSettings") + slot);
  policy_ = new QComboBox;
  policy_->setObjectName(QStringLiteral("policy"));
  policy_->addItem(tr("none (pruning only)"), kNoPolicy);
  QStringList descriptions;
  for (const EvictionPolicyInfo& info : evictionPolicyTable()) {
    const QString name = QString::fromUtf8(info.name);
    policy_->addItem(name, name);
    descriptions << name + QStringLiteral(": ") + QString::fromUtf8(info.description);
  }
  policy_->setToolTip(tr("token eviction: which rows each kv head keeps (%1)").arg(descriptions.join(QStringLiteral("; "))));
  budget_ = fractionBox(0.25, tr("fraction of the prefill rows each kv head keeps, in (0, 1]"));
  budget_->setObjectName(QStringLiteral("budget"));
  window_ = countBox(-1, -1, tr("h2o: recent rows always kept (default half the budget); snapkv / pyramid: the last "
                                "queries that score (default 16); output-aware pruning: the queries that weigh entries"));
  window_->setSpecialValueText(tr("default"));
  sinks_ = countBox(0, 4, tr("streaming: the first rows always kept (attention sinks)"));
  kernel_ = countBox(0, 5, tr("snapkv / pyramid: max-pooling width over positions, odd"));
  seed_ = countBox(0, 0, tr("random: the seed of the scores"));
  element_ = new QComboBox;
  element_->setObjectName(QStringLiteral("element"));
  element_->addItem(tr("off"), kNoPruning);
  element_->addItem(QStringLiteral("per-token"), QStringLiteral("per-token"));
  element_->addItem(QStringLiteral("per-channel"), QStringLiteral("per-channel"));
  element_->setToolTip(tr("element pruning: zero single K / V entries (per-token: the best channels of each row; "
                          "per-channel: the best rows of each channel)"));
  score_ = new QComboBox;
  score_->addItem(QStringLiteral("magnitude"), QStringLiteral("magnitude"));
  score_->addItem(QStringLiteral("output-aware"), QStringLiteral("output-aware"));
  k_sparsity_ = fractionBox(0.5, tr("fraction of K entries zeroed, in [0, 1)"));
  k_sparsity_->setObjectName(QStringLiteral("kSparsity"));
  v_sparsity_ = fractionBox(0.5, tr("fraction of V entries zeroed, in [0, 1)"));
  v_sparsity_->setObjectName(QStringLiteral("vSparsity"));
  dense_window_ = countBox(0, 32, tr("the newest rows, never pruned"));

  auto* form = new QFormLayout(this);
  form->setContentsMargins(4, 4, 4, 4);
  form->setVerticalSpacing(3);
  if (optional) {
    enabled_ = new QCheckBox(tr("compare with slot A"));
    enabled_->setObjectName(QStringLiteral("slotEnabled"));
    enabled_->setChecked(true);
    form->addRow(enabled_);
    connect(enabled_, &QCheckBox::toggled, this, [this] { updateEnabledFields(); });
  }
  form->addRow(tr("policy"), policy_);
  form->addRow(tr("budget"), budget_);
  form->addRow(tr("window"), window_);
  form->addRow(tr("sinks"), sinks_);
  form->addRow(tr("kernel"), kernel_);
  form->addRow(tr("seed"), seed_);
  form->addRow(tr("element pruning"), element_);
  form->addRow(tr("score"), score_);
  form->addRow(tr("K sparsity"), k_sparsity_);
  form->addRow(tr("V sparsity"), v_sparsity_);
  form->addRow(tr("dense window"), dense_window_);

  for (QComboBox* box : {policy_, element_, score_}) {
    connect(box, &QComboBox::currentIndexChanged, this, [this] { updateEnabledFields(); });
  }
  for (QDoubleSpinBox* box : {budget_, k_sparsity_, v_sparsity_}) {
    connect(box, &QDoubleSpinBox::valueChanged, this, &CompressionSettingsForm::changed);
  }
  for (QSpinBox* box : {window_, sinks_, kernel_, seed_, dense_window_}) {
    connect(box, &QSpinBox::valueChanged, this, &CompressionSettingsForm::changed);
  }
  setPolicy(QStringLiteral("h2o"));
  updateEnabledFields();
}

QString CompressionSettingsForm::policyName() const { return policy_->currentData().toString(); }
QString CompressionSettingsForm::elementName() const { return element_->currentData().toString(); }

bool CompressionSettingsForm::enabledSlot() const { return enabled_ == nullptr || enabled_->isChecked(); }

void CompressionSettingsForm::setEnabledSlot(bool enabled) {
  if (enabled_) enabled_->setChecked(enabled);
}

// Only the fields the chosen policy and pruning read can be edited (as the
// CLI refuses the others; which policy reads which option is the policy
// table's, core/cache/eviction_policy_table.h).
void CompressionSettingsForm::updateEnabledFields() {
  const bool on = enabledSlot();
  const QString policy = policyName();
  const bool evicting = policy != kNoPolicy;
  const auto reads = [&](EvictionOption option) {
    return evicting && evictionPolicyInfo(parseEvictionPolicy(policy.toStdString())).reads(option);
  };
  const bool pruning = elementName() != kNoPruning;
  const bool output_aware = pruning && score_->currentData().toString() == QStringLiteral("output-aware");
  policy_->setEnabled(on);
  budget_->setEnabled(on && evicting);
  window_->setEnabled(on && (reads(EvictionOption::Window) || output_aware));
  sinks_->setEnabled(on && reads(EvictionOption::Sinks));
  kernel_->setEnabled(on && reads(EvictionOption::Kernel));
  seed_->setEnabled(on && reads(EvictionOption::Seed));
  element_->setEnabled(on);
  for (QWidget* field : std::initializer_list<QWidget*>{score_, k_sparsity_, v_sparsity_, dense_window_}) {
    field->setEnabled(on && pruning);
  }
  emit changed();
}

bool CompressionSettingsForm::spec(CompressionSpec* out, QString* error) const {
  CompressionSpec spec;
  try {
    if (policyName() != kNoPolicy) {
      EvictionSettings e;
      e.policy = parseEvictionPolicy(policyName().toStdString());
      e.budget.fraction = budget_->value();
      e.window = window_->value();
      e.sinks = sinks_->value();
      e.kernel = kernel_->value();
      e.seed = static_cast<uint64_t>(seed_->value());
      spec.eviction = e;
    }
    if (elementName() != kNoPruning) {
      PruneSettings p;
      p.axis = parsePruneAxis(elementName().toStdString());
      p.score = parseElementScore(score_->currentData().toString().toStdString());
      p.k_sparsity = k_sparsity_->value();
      p.v_sparsity = v_sparsity_->value();
      p.dense_window = dense_window_->value();
      if (window_->value() != -1) p.query_window = window_->value();
      spec.pruning = p;
    }
    if (!spec.eviction && !spec.pruning) throw Error("choose an eviction policy or element pruning (or both)");
    spec.validate();
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return false;
  }
  *out = spec;
  return true;
}

QString CompressionSettingsForm::label() const {
  QStringList parts;
  if (policyName() != kNoPolicy) parts << QStringLiteral("%1 %2").arg(policyName(), percent(budget_->value()));
  if (elementName() != kNoPruning) {
    const QString sparsity = k_sparsity_->value() == v_sparsity_->value()
                                 ? percent(k_sparsity_->value())
                                 : QStringLiteral("K %1 V %2").arg(percent(k_sparsity_->value()), percent(v_sparsity_->value()));
    parts << QStringLiteral("%1 %2").arg(elementName(), sparsity);
  }
  return parts.isEmpty() ? tr("nothing") : parts.join(QStringLiteral(" + "));
}

bool CompressionSettingsForm::setPolicy(const QString& name, QString* error) {
  const int index = policy_->findData(name);
  if (index < 0) {
    try {
      parseEvictionPolicy(name.toStdString());  // throws the list of names
    } catch (const std::exception& e) {
      if (error) *error = QString::fromUtf8(e.what());
    }
    return false;
  }
  policy_->setCurrentIndex(index);
  return true;
}

void CompressionSettingsForm::setBudget(double fraction) { budget_->setValue(fraction); }
void CompressionSettingsForm::setWindow(int window) { window_->setValue(window); }
void CompressionSettingsForm::setSinks(int sinks) { sinks_->setValue(sinks); }
void CompressionSettingsForm::setKernel(int kernel) { kernel_->setValue(kernel); }
void CompressionSettingsForm::setSeed(int seed) { seed_->setValue(seed); }
void CompressionSettingsForm::setDenseWindow(int rows) { dense_window_->setValue(rows); }

void CompressionSettingsForm::setSparsity(double k, double v) {
  k_sparsity_->setValue(k);
  v_sparsity_->setValue(v);
}

bool CompressionSettingsForm::setElement(const QString& axis, QString* error) {
  const int index = element_->findData(axis);
  if (index < 0) {
    if (error) *error = tr("element pruning must be off, per-token or per-channel, got '%1'").arg(axis);
    return false;
  }
  element_->setCurrentIndex(index);
  return true;
}

bool CompressionSettingsForm::setScore(const QString& score, QString* error) {
  const int index = score_->findData(score);
  if (index < 0) {
    if (error) *error = tr("the score must be magnitude or output-aware, got '%1'").arg(score);
    return false;
  }
  score_->setCurrentIndex(index);
  return true;
}

bool CompressionSettingsForm::applyShorthand(const QString& text, QString* error) {
  const QStringList parts = text.trimmed().split(QLatin1Char(':'));
  bool number = false;
  const double amount = parts.size() == 2 ? parts[1].toDouble(&number) : 0.0;
  if (parts.size() != 2 || !number) {
    if (error) *error = tr("expected POLICY:BUDGET (h2o:0.25) or AXIS:SPARSITY (per-channel:0.7), got '%1'").arg(text);
    return false;
  }
  setEnabledSlot(true);
  if (element_->findData(parts[0]) > 0) {  // pruning alone
    policy_->setCurrentIndex(0);
    setElement(parts[0]);
    setSparsity(amount, amount);
    return true;
  }
  if (!setPolicy(parts[0], error)) return false;
  element_->setCurrentIndex(0);
  setBudget(amount);
  return true;
}

}  // namespace kvscope::ui
