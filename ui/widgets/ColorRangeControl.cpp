#include "ui/widgets/ColorRangeControl.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>

namespace kvscope::ui {

ColorRangeControl::ColorRangeControl(QWidget* parent) : QWidget(parent) {
  autofit_ = new QCheckBox(tr("Autofit"));
  autofit_->setChecked(true);
  autofit_->setToolTip(tr("Symmetric range around 0 from the values shown"));
  lower_ = new QDoubleSpinBox;
  upper_ = new QDoubleSpinBox;
  for (QDoubleSpinBox* box : {lower_, upper_}) {
    box->setRange(-1000, 1000);
    box->setDecimals(3);
    box->setSingleStep(0.1);
    box->setEnabled(false);
  }
  lower_->setValue(-1);
  upper_->setValue(1);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(tr("Colour range")));
  layout->addWidget(autofit_);
  auto* dash = new QLabel(QStringLiteral("\u2013"));
  layout->addWidget(lower_);
  layout->addWidget(dash);
  layout->addWidget(upper_);
  // Autofit names its range on the check box; the boxes appear when the range is yours to set
  // (shown disabled, they took the room the legend beside them needs).
  for (QWidget* manual : std::initializer_list<QWidget*>{lower_, dash, upper_}) manual->setVisible(false);
  connect(autofit_, &QCheckBox::toggled, this, [this, dash](bool on) {
    lower_->setEnabled(!on);
    upper_->setEnabled(!on);
    for (QWidget* manual : std::initializer_list<QWidget*>{lower_, dash, upper_}) manual->setVisible(!on);
    nameAutofitRange();
    emit rangeChanged();
  });
  connect(lower_, &QDoubleSpinBox::valueChanged, this, [this] { if (!autofit_->isChecked()) emit rangeChanged(); });
  connect(upper_, &QDoubleSpinBox::valueChanged, this, [this] { if (!autofit_->isChecked()) emit rangeChanged(); });
}

ColorRange ColorRangeControl::range() const {
  return ColorRange{autofit_->isChecked(), lower_->value(), upper_->value()};
}

void ColorRangeControl::showAutofitRange(double lower, double upper) {
  if (!autofit_->isChecked()) return;
  const QSignalBlocker block_lower(lower_), block_upper(upper_);
  lower_->setValue(lower);
  upper_->setValue(upper);
  nameAutofitRange();
}

void ColorRangeControl::nameAutofitRange() {
  if (!autofit_->isChecked()) {
    autofit_->setText(tr("Autofit"));
    return;
  }
  const double lower = lower_->value(), upper = upper_->value();
  autofit_->setText(lower == -upper ? tr("Autofit \u00b1%1").arg(upper, 0, 'g', 3)
                                    : tr("Autofit %1 \u2013 %2").arg(lower, 0, 'g', 3).arg(upper, 0, 'g', 3));
}

}  // namespace kvscope::ui
