#pragma once
// Autofit checkbox plus a manual lower/upper range for heatmaps.
#include <QWidget>

#include "ui/widgets/ColorRange.h"

class QCheckBox;
class QDoubleSpinBox;

namespace kvscope::ui {

class ColorRangeControl : public QWidget {
  Q_OBJECT
 public:
  explicit ColorRangeControl(QWidget* parent = nullptr);
  ColorRange range() const;
  // Shows the range autofit chose (the spin boxes follow while autofit is on).
  void showAutofitRange(double lower, double upper);

 signals:
  void rangeChanged();

 private:
  void nameAutofitRange();
  QCheckBox* autofit_;
  QDoubleSpinBox* lower_;
  QDoubleSpinBox* upper_;
};

}  // namespace kvscope::ui
