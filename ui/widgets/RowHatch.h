#pragma once
// The hatching under a heatmap whose removed rows are drawn transparent: grey
// diagonal lines, so "removed" reads differently from "zero" (the gradient's
// white middle) at a glance and in greyscale print.
#include <QBrush>

namespace kvscope::ui {

QBrush removedRowHatch();

}  // namespace kvscope::ui
