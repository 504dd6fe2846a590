#pragma once
// A hybrid model's recurrent states (docs/capture-format-v3.md, "Recurrent
// state"), one table row per call, recurrent layer and state kind (conv, SSM):
// the state the call resumed from and the one it left, with its identity (the
// position it is after, the tokens it folded in). A state a call resumed from
// that breaks the rule (it must be the state after the position before the
// call's first input) is red, the check's root cause bold, with the rule's
// sentence above the table. Hidden for a capture without recurrent states.
#include <QWidget>

#include "core/snapshot/snapshot.h"

class QLabel;
class QTableWidget;

namespace kvscope::ui {

class RecurrentStatesView : public QWidget {
  Q_OBJECT
 public:
  explicit RecurrentStatesView(QWidget* parent = nullptr);
  void showStates(const SessionSnapshot* snapshot);
  QTableWidget* table() const { return table_; }
  QLabel* breachLabel() const { return breach_; }
  // The table row of the check's root cause; -1 when it is no state breach.
  int rootCauseRow() const { return root_cause_row_; }

 private:
  void fillRow(int row, const SessionSnapshot& snapshot, const RecurrentStateRow& state);

  QLabel* title_;
  QLabel* breach_;
  QTableWidget* table_;
  int root_cause_row_ = -1;
};

}  // namespace kvscope::ui
