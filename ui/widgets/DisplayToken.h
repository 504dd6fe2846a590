#pragma once
// A token's text as every view shows it: in a strip, a row label, a tooltip,
// a lesson's sentence. One function, so a newline reads as the same arrow
// wherever the token appears.
#include <QString>
#include <string>

namespace kvscope::ui {

// A token's text made visible (spaces kept, newlines and empties shown),
// elided beyond kTokenShownBytes (ui/widgets/LongText.h).
QString displayToken(const std::string& text);

}  // namespace kvscope::ui
