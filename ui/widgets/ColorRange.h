#pragma once
// How a heatmap maps values to colours: autofit (symmetric around zero, from
// the data shown) or a fixed range the user typed.
namespace kvscope::ui {

struct ColorRange {
  bool autofit = true;
  double lower = -1.0;
  double upper = 1.0;
};

}  // namespace kvscope::ui
