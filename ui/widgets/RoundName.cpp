#include "ui/widgets/RoundName.h"

#include <QObject>

namespace kvscope::ui {

QString roundName(const SessionSnapshot* snapshot, int64_t round) {
  if (snapshot && snapshot->from_capture) {
    // The round's forward of the target ("target call 6"); changes between calls are named "..., between calls".
    for (const CacheEvent& e : snapshot->events.events()) {
      if (e.round != round || e.call.rfind("target call ", 0) != 0 || e.call.find(',') != std::string::npos) continue;
      return QString::fromStdString(e.call);
    }
  }
  return QObject::tr("round %1").arg(round);
}

}  // namespace kvscope::ui
