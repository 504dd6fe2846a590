#pragma once
// How a cache row is named on every axis: by identity, not by index.
#include <QString>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// "10 ' I'" when the row sits at its own position, "r11:p10 ' I'" when not,
// "removed p12 'x'" for a row already removed (in words: "-:p12" read as a minus sign).
QString rowLabel(const SessionSnapshot& snapshot, const ViewRow& row, int max_token_chars = 8);
QString rowLabel(const SessionSnapshot& snapshot, int64_t physical_row, int64_t entry, int max_token_chars = 8);

}  // namespace kvscope::ui
