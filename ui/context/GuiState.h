#pragma once
// The investigation a trace keeps besides the session: the cursor (moment and
// selection) and the bookmarks, as the JSON object stored in the trace's
// "gui" field. Plain conversion, no widgets.
#include <QJsonObject>
#include <QStringList>
#include <QVector>

#include "core/snapshot/snapshot.h"
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
// A field of the wrong kind (a float, a string where an integer belongs, an
// unknown phase name) keeps its default and adds a warning naming it.
GuiState guiStateFromJson(const QJsonObject& json, QStringList* warnings = nullptr);

// The "gui" block of a trace comes from whoever sent the file: holds `state`
// against the snapshot it is applied to. A cursor field outside what the
// trace recorded (a round after its last, a layer or head it lacks, a
// position, ledger entry or row beyond its counts, the drafter cache of a
// session without one) is clamped or dropped, bookmarks that are not rounds
// of the trace (or repeat one) are dropped; each change is one warning that
// names the field ("gui.layer"), the value and what the trace holds.
QStringList fitGuiState(GuiState& state, const SessionSnapshot& snapshot);

}  // namespace kvscope::ui
