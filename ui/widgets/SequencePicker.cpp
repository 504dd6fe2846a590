#include "ui/widgets/SequencePicker.h"

#include <QHBoxLayout>
#include <QSignalBlocker>

namespace kvscope::ui {

SequencePicker::SequencePicker(Kind kind, QWidget* parent)
    : QWidget(parent), label_(new QLabel), combo_(new QComboBox), note_(new QLabel) {
  const bool ranks = kind == Kind::Rank;
  label_->setText(ranks ? tr("Rank:") : tr("Batch:"));
  setObjectName(ranks ? QStringLiteral("rankPicker") : QStringLiteral("sequencePicker"));
  combo_->setObjectName(ranks ? QStringLiteral("rankCombo") : QStringLiteral("sequenceCombo"));
  note_->setObjectName(ranks ? QStringLiteral("rankNote") : QStringLiteral("sequenceNote"));
  combo_->setToolTip(ranks ? tr("The rank of the tensor-parallel run every panel shows (each rank's capture holds "
                                "its own KV heads and is checked on them; the root cause is the first breach in "
                                "the engine's run, whichever rank it broke)")
                           : tr("The sequence of the batch every panel shows (a batched capture, or a live batch: "
                                "each sequence is checked as its own run; the root cause is the first breach in the "
                                "engine's run)"));
  combo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(label_);
  layout->addWidget(combo_);
  layout->addWidget(note_);
  note_->setVisible(false);
  connect(combo_, &QComboBox::activated, this, [this](int index) { emit picked(index); });
  setVisible(false);
}

void SequencePicker::setSequences(const QStringList& labels, int shown) {
  const QSignalBlocker quiet(combo_);
  combo_->clear();
  combo_->addItems(labels);
  combo_->setCurrentIndex(shown);
  // The status bar squeezes its widgets; the shown item's label must stay
  // readable, so the message beside it gives way instead.
  combo_->setMinimumWidth(combo_->sizeHint().width());
  setVisible(labels.size() > 1);
}

void SequencePicker::setNote(const QString& note) {
  note_->setText(note);
  note_->setVisible(!note.isEmpty());
}

}  // namespace kvscope::ui
