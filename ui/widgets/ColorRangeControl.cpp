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
  layout->addWidget(lower_);
  layout->addWidget(new QLabel(QStringLiteral("\u2013")));
  layout->addWidget(upper_);
  connect(autofit_, &QCheckBox::toggled, this, [this](bool on) {
    lower_->setEnabled(!on);
    upper_->setEnabled(!on);
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
}

}  // namespace kvscope::ui
