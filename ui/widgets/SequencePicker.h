#pragma once
// A status-bar picker of what every panel shows, in two kinds: which sequence
// of a batched capture (Batch) and which rank of a tensor-parallel run's
// captures (Rank). Every panel draws one snapshot, so picking reopens the
// capture on the item and every panel follows. Hidden while there are fewer
// than two items. A note beside the list says what the shown item holds
// (a rank's KV heads).
#include <QComboBox>
#include <QLabel>
#include <QStringList>
#include <QWidget>

namespace kvscope::ui {

class SequencePicker : public QWidget {
  Q_OBJECT
 public:
  enum class Kind { Sequence, Rank };
  explicit SequencePicker(QWidget* parent = nullptr) : SequencePicker(Kind::Sequence, parent) {}
  explicit SequencePicker(Kind kind, QWidget* parent = nullptr);
  // labels: one per item ("sequence 1: root cause", "rank 1 of 2: root cause");
  // fewer than two hides the picker.
  void setSequences(const QStringList& labels, int shown);
  // Shown right of the list ("" hides it).
  void setNote(const QString& note);
  int shown() const { return combo_->currentIndex(); }
  int count() const { return combo_->count(); }

 signals:
  void picked(int item);

 private:
  QLabel* label_;
  QComboBox* combo_;
  QLabel* note_;
};

}  // namespace kvscope::ui
