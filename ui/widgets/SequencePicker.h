#pragma once
// Which sequence of a batched capture the views show. Every panel draws one
// snapshot, so picking a sequence reopens the capture on it and every panel
// follows. Hidden while the open capture (or session) holds one sequence.
#include <QComboBox>
#include <QLabel>
#include <QStringList>
#include <QWidget>

namespace kvscope::ui {

class SequencePicker : public QWidget {
  Q_OBJECT
 public:
  explicit SequencePicker(QWidget* parent = nullptr);
  // labels: one per sequence ("sequence 1: root cause"); fewer than two hides the picker.
  void setSequences(const QStringList& labels, int shown);
  int shown() const { return combo_->currentIndex(); }

 signals:
  void picked(int sequence);

 private:
  QLabel* label_;
  QComboBox* combo_;
};

}  // namespace kvscope::ui
