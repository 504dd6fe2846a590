#include "ui/widgets/ShardText.h"

#include <QCoreApplication>
#include <QStringList>

namespace kvscope::ui {

namespace {

QString tr(const char* text) { return QCoreApplication::translate("kvscope::ui::ShardText", text); }

}  // namespace

QString heldHeadsText(const CacheGeometry& g) {
  if (!g.present || g.model_kv_heads <= 0 || g.kv_heads <= 0) return {};
  if (g.kv_heads == 1) return tr("KV head %1 of %2").arg(g.first_kv_head).arg(g.model_kv_heads);
  return tr("KV heads %1-%2 of %3").arg(g.first_kv_head).arg(g.modelHead(g.kv_heads - 1)).arg(g.model_kv_heads);
}

QString shardText(const SessionSnapshot& s) {
  if (s.rank < 0) return {};
  QStringList held;
  if (const QString t = heldHeadsText(s.target); !t.isEmpty()) held << tr("target %1").arg(t);
  if (const QString d = heldHeadsText(s.drafter); !d.isEmpty()) held << tr("drafter %1").arg(d);
  if (held.isEmpty()) return tr("rank %1 of %2").arg(s.rank).arg(s.ranks);
  return tr("rank %1 of %2 holds %3").arg(s.rank).arg(s.ranks).arg(held.join(QStringLiteral(", ")));
}

QString shardNote(const SessionSnapshot& s) {
  if (s.rank < 0) return {};
  const QString target = heldHeadsText(s.target), drafter = heldHeadsText(s.drafter);
  if (target.isEmpty() && drafter.isEmpty()) return {};
  // The combo beside it names the rank; the note says only what it holds.
  if (drafter.isEmpty() || drafter == target) return tr("holds %1").arg(target.isEmpty() ? drafter : target);
  if (target.isEmpty()) return tr("holds drafter %1").arg(drafter);
  return tr("holds target %1, drafter %2").arg(target, drafter);
}

}  // namespace kvscope::ui
