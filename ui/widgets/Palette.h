#pragma once
// The colours every panel uses for token origins and cache row states.
#include <QColor>

#include "core/trace/snapshot.h"

namespace kvscope::ui {

struct Palette {
  static QColor prompt() { return QColor(215, 215, 215); }
  static QColor acceptedDraft() { return QColor(120, 200, 120); }
  static QColor correction() { return QColor(90, 150, 230); }
  static QColor bonus() { return QColor(240, 190, 60); }
  static QColor rejected() { return QColor(230, 90, 80); }
  static QColor pending() { return QColor(200, 180, 240); }
  static QColor written() { return QColor(40, 170, 60); }
  static QColor pruned() { return QColor(220, 40, 40); }
  static QColor selection() { return QColor(255, 170, 0); }

  static QColor origin(TokenOrigin origin) {
    switch (origin) {
      case TokenOrigin::Prompt: return prompt();
      case TokenOrigin::AcceptedDraft: return acceptedDraft();
      case TokenOrigin::Correction: return correction();
      case TokenOrigin::Bonus: return bonus();
    }
    return prompt();
  }
};

}  // namespace kvscope::ui
