#pragma once
// The investigation a trace keeps besides the session: the cursor (moment and
// selection) and the bookmarks, as the JSON object stored in the trace's
// "gui" field. Plain conversion, no widgets.
#include <QJsonObject>
#include <QVector>

#include "ui/context/Cursor.h"

namespace kvscope::ui {

struct GuiState {
  Cursor cursor;
  QVector<int64_t> bookmarks;
  bool values = false;     // the KV panel shows V (else K)
  int query_head = -1;     // Verify Attention's query head within the kv head's group (-1: its first)
};

QJsonObject toJson(const GuiState& state);
// Missing fields keep their defaults; an empty object gives an invalid cursor.
GuiState guiStateFromJson(const QJsonObject& json);

}  // namespace kvscope::ui
