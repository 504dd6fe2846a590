#include "ui/widgets/SequencePicker.h"

#include <QHBoxLayout>
#include <QSignalBlocker>

namespace kvscope::ui {

SequencePicker::SequencePicker(QWidget* parent) : QWidget(parent), label_(new QLabel(tr("Batch:"))), combo_(new QComboBox) {
  setObjectName(QStringLiteral("sequencePicker"));
  combo_->setObjectName(QStringLiteral("sequenceCombo"));
  combo_->setToolTip(tr("The sequence of the batched capture every panel shows (each sequence is checked as its own "
                        "run; the root cause is the first breach in the engine's run)"));
  combo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(label_);
  layout->addWidget(combo_);
  connect(combo_, &QComboBox::activated, this, [this](int index) { emit picked(index); });
  setVisible(false);
}

void SequencePicker::setSequences(const QStringList& labels, int shown) {
  const QSignalBlocker quiet(combo_);
  combo_->clear();
  combo_->addItems(labels);
  combo_->setCurrentIndex(shown);
  setVisible(labels.size() > 1);
}

}  // namespace kvscope::ui
