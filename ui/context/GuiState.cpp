#include "ui/context/GuiState.h"

#include <QJsonArray>
#include <algorithm>

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

Phase phaseFrom(const QJsonValue& value) {
  for (Phase phase : {Phase::Prefill, Phase::Draft, Phase::Verify, Phase::Accept, Phase::Prune}) {
    if (value.toString() == QString::fromUtf8(phaseName(phase))) return phase;
  }
  return static_cast<Phase>(std::clamp(value.toInt(), 0, 4));  // traces saved before names were used
}

}  // namespace

GuiState guiStateFromJson(const QJsonObject& json) {
  GuiState state;
  Cursor& c = state.cursor;
  c.round = json.value(QStringLiteral("round")).toInteger(-1);
  c.phase = phaseFrom(json.value(QStringLiteral("phase")));
  c.position = json.value(QStringLiteral("position")).toInteger(-1);
  c.cache = json.value(QStringLiteral("cache")).toString() == QString::fromUtf8(cacheRoleName(CacheRole::Drafter))
                ? CacheRole::Drafter
                : CacheRole::Target;
  c.layer = json.value(QStringLiteral("layer")).toInteger(json.value(QStringLiteral("target_layer")).toInteger(0));
  c.head = json.value(QStringLiteral("head")).toInteger(json.value(QStringLiteral("target_head")).toInteger(0));
  c.row = json.value(QStringLiteral("row")).toInteger(-1);
  c.entry = json.value(QStringLiteral("entry")).toInteger(-1);
  for (const QJsonValue& round : json.value(QStringLiteral("bookmarks")).toArray()) state.bookmarks.push_back(round.toInteger());
  state.values = json.value(QStringLiteral("values")).toBool();
  state.query_head = json.value(QStringLiteral("query_head")).toInt(-1);
  return state;
}

}  // namespace kvscope::ui
