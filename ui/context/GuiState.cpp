#include "ui/context/GuiState.h"

#include <QJsonArray>
#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope::ui {

QJsonObject toJson(const GuiState& state) {
  const Cursor& c = state.cursor;
  QJsonObject json;
  json[QStringLiteral("round")] = static_cast<qint64>(c.round);
  json[QStringLiteral("phase")] = QString::fromUtf8(phaseName(c.phase));
  json[QStringLiteral("position")] = static_cast<qint64>(c.position);
  json[QStringLiteral("cache")] = QString::fromUtf8(cacheRoleName(c.cache));
  json[QStringLiteral("layer")] = static_cast<qint64>(c.layer);
  json[QStringLiteral("head")] = static_cast<qint64>(c.head);
  json[QStringLiteral("row")] = static_cast<qint64>(c.row);
  json[QStringLiteral("entry")] = static_cast<qint64>(c.entry);
  QJsonArray bookmarks;
  for (int64_t round : state.bookmarks) bookmarks.append(static_cast<qint64>(round));
  json[QStringLiteral("bookmarks")] = bookmarks;
  json[QStringLiteral("values")] = state.values;
  json[QStringLiteral("query_head")] = state.query_head;
  return json;
}

namespace {

QString field(const char* name) { return QStringLiteral("gui.") + QLatin1String(name); }

QString shown(const QJsonValue& value) {
  if (value.isDouble()) return QString::number(value.toDouble(), 'g', 17);
  if (value.isString()) return QStringLiteral("\"%1\"").arg(value.toString().left(40));
  return QStringLiteral("a value that is not a number");
}

// An integer field, or its fallback with a warning when it holds something
// else (toInteger() turns 2.5, 1e300 and "7" into the fallback in silence).
int64_t integerOf(const QJsonObject& json, const char* name, int64_t fallback, QStringList* warnings) {
  const QJsonValue value = json.value(QLatin1String(name));
  if (value.isUndefined() || value.isNull()) return fallback;
  const double number = value.toDouble();
  if (value.isDouble() && number == std::floor(number) && std::abs(number) < 9.0e15) return value.toInteger(fallback);
  if (warnings) *warnings << QStringLiteral("%1: %2 is not an integer; ignored").arg(field(name), shown(value));
  return fallback;
}

Phase phaseFrom(const QJsonValue& value, QStringList* warnings) {
  for (Phase phase : {Phase::Prefill, Phase::Draft, Phase::Verify, Phase::Accept, Phase::Prune}) {
    if (value.toString() == QString::fromUtf8(phaseName(phase))) return phase;
  }
  // Traces saved before names were used hold the number.
  if (value.isDouble() && value.toDouble() >= 0 && value.toDouble() <= 4 && value.toDouble() == std::floor(value.toDouble())) {
    return static_cast<Phase>(value.toInt());
  }
  if (warnings && !value.isUndefined()) *warnings << QStringLiteral("gui.phase: %1 is not a phase; prefill used").arg(shown(value));
  return Phase::Prefill;
}

}  // namespace

GuiState guiStateFromJson(const QJsonObject& json, QStringList* warnings) {
  GuiState state;
  Cursor& c = state.cursor;
  c.round = integerOf(json, "round", -1, warnings);
  c.phase = phaseFrom(json.value(QStringLiteral("phase")), warnings);
  c.position = integerOf(json, "position", -1, warnings);
  c.cache = json.value(QStringLiteral("cache")).toString() == QString::fromUtf8(cacheRoleName(CacheRole::Drafter))
                ? CacheRole::Drafter
                : CacheRole::Target;
  c.layer = integerOf(json, "layer", integerOf(json, "target_layer", 0, warnings), warnings);
  c.head = integerOf(json, "head", integerOf(json, "target_head", 0, warnings), warnings);
  c.row = integerOf(json, "row", -1, warnings);
  c.entry = integerOf(json, "entry", -1, warnings);
  const QJsonArray bookmarks = json.value(QStringLiteral("bookmarks")).toArray();
  for (qsizetype i = 0; i < bookmarks.size(); ++i) {
    const QJsonValue round = bookmarks[i];
    if (round.isDouble() && round.toDouble() == std::floor(round.toDouble()) && std::abs(round.toDouble()) < 9.0e15) {
      state.bookmarks.push_back(round.toInteger());
    } else if (warnings) {
      *warnings << QStringLiteral("gui.bookmarks[%1]: %2 is not a round number; dropped").arg(i).arg(shown(round));
    }
  }
  state.values = json.value(QStringLiteral("values")).toBool();
  state.query_head = static_cast<int>(std::clamp<int64_t>(integerOf(json, "query_head", -1, warnings), -2, std::numeric_limits<int>::max()));
  return state;
}

namespace {

// `value` of `name` within [min, max], else `replacement` and a warning.
void fit(int64_t& value, const char* name, int64_t min, int64_t max, int64_t replacement, const QString& holds,
         QStringList& warnings) {
  if (value >= min && value <= max) return;
  warnings << QStringLiteral("%1 %2 is outside what the trace holds (%3): %4")
                  .arg(field(name))
                  .arg(value)
                  .arg(holds, replacement < 0 ? QStringLiteral("dropped") : QStringLiteral("set to %1").arg(replacement));
  value = replacement;
}

QString listOf(const QVector<int64_t>& values) {
  QStringList shown;
  for (qsizetype i = 0; i < values.size() && i < 5; ++i) shown << QString::number(values[i]);
  if (values.size() > 5) shown << QStringLiteral("and %1 more").arg(values.size() - 5);
  return shown.join(QStringLiteral(", "));
}

void fitBookmarks(QVector<int64_t>& bookmarks, int64_t last_round, QStringList& warnings) {
  QVector<int64_t> kept, outside, repeated;
  for (int64_t round : bookmarks) {
    if (round < 0 || round > last_round) outside << round;
    else if (kept.contains(round)) repeated << round;
    else kept << round;
  }
  if (!outside.isEmpty()) {
    warnings << QStringLiteral("gui.bookmarks: dropped %1 (not rounds of this trace, which has rounds 0-%2)")
                    .arg(listOf(outside))
                    .arg(last_round);
  }
  if (!repeated.isEmpty()) warnings << QStringLiteral("gui.bookmarks: dropped repeats of %1").arg(listOf(repeated));
  bookmarks = kept;
}

}  // namespace

QStringList fitGuiState(GuiState& state, const SessionSnapshot& snapshot) {
  QStringList warnings;
  Cursor& c = state.cursor;
  const int64_t last = snapshot.lastRound();
  if (c.round > last) {
    fit(c.round, "round", -1, last, last, QStringLiteral("rounds 0-%1").arg(last), warnings);
    c.phase = snapshot.lastPhase();
  }
  fit(c.round, "round", -1, last, -1, QStringLiteral("rounds 0-%1").arg(last), warnings);
  if (c.round >= 0 && !atOrBefore(c.moment(), snapshot.lastMoment())) {
    warnings << QStringLiteral("gui.phase %1 of round %2 comes after the trace's last moment (%3): set to %3")
                    .arg(QString::fromUtf8(phaseName(c.phase)))
                    .arg(c.round)
                    .arg(QString::fromUtf8(phaseName(snapshot.lastPhase())));
    c.phase = snapshot.lastPhase();
  }
  if (c.cache == CacheRole::Drafter && !snapshot.drafter.present) {
    warnings << QStringLiteral("gui.cache: drafter, but the trace's session has no drafter cache: target used");
    c.cache = CacheRole::Target;
  }
  const CacheGeometry& g = snapshot.geometry(c.cache);
  const QString cache = QString::fromUtf8(cacheRoleName(c.cache));
  fit(c.layer, "layer", 0, g.layers - 1, std::clamp<int64_t>(c.layer, 0, std::max<int64_t>(g.layers - 1, 0)),
      QStringLiteral("the %1 cache has %2 layers").arg(cache).arg(g.layers), warnings);
  fit(c.head, "head", 0, g.kv_heads - 1, std::clamp<int64_t>(c.head, 0, std::max<int64_t>(g.kv_heads - 1, 0)),
      QStringLiteral("the %1 cache has %2 kv heads").arg(cache).arg(g.kv_heads), warnings);
  const auto positions = static_cast<int64_t>(snapshot.sequence.size()) + snapshot.current_gamma + 1;
  fit(c.position, "position", -1, positions - 1, -1, QStringLiteral("positions 0-%1").arg(positions - 1), warnings);
  const auto entries = static_cast<int64_t>(snapshot.entries.size());
  fit(c.entry, "entry", -1, entries - 1, -1, QStringLiteral("%1 ledger entries").arg(entries), warnings);
  // A cache never holds more rows than the ledger has entries.
  fit(c.row, "row", -1, entries - 1, -1, QStringLiteral("at most %1 cache rows").arg(entries), warnings);
  fitBookmarks(state.bookmarks, last, warnings);
  const int64_t group = snapshot.target.kv_heads > 0 ? std::max<int64_t>(1, snapshot.target.heads / snapshot.target.kv_heads) : 1;
  int64_t query_head = state.query_head;
  fit(query_head, "query_head", -1, group - 1, -1,
      QStringLiteral("%1 query heads per kv head").arg(group), warnings);
  state.query_head = static_cast<int>(query_head);
  return warnings;
}

}  // namespace kvscope::ui
