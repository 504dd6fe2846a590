#include "ui/widgets/DisplayToken.h"

#include "ui/widgets/LongText.h"

namespace kvscope::ui {

QString displayToken(const std::string& text) {
  QString shown = elidedForDisplay(text, kTokenShownBytes);
  shown.replace(QLatin1Char('\n'), QStringLiteral("\u21b5"));
  shown.replace(QLatin1Char('\t'), QStringLiteral("\u2192"));
  if (shown.isEmpty()) shown = QStringLiteral("\u2205");
  return shown;
}

}  // namespace kvscope::ui
