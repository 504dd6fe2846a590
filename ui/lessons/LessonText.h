#pragma once
// A lesson page's text with its {names} filled from the running session at
// the cursor: the numbers a teacher talks about come from the model in front
// of the class, not from the lesson file.
#include <QMap>
#include <QString>
#include <QStringList>

#include "core/snapshot/snapshot.h"
#include "ui/context/Cursor.h"

namespace kvscope::ui {

// Every name a lesson text may use, e.g. {gamma}, {n}, {target_drop}.
QStringList lessonTextNames();
// One line per name: what it stands for (resources/lessons/README.md lists the same).
QString lessonTextNameHelp();
// The value of each name for `snapshot` at `cursor` (the cursor's round for
// the round's numbers; "?" where the session has no such thing yet).
QMap<QString, QString> lessonTextValues(const SessionSnapshot& snapshot, const Cursor& cursor);
QString fillLessonText(const QString& text, const SessionSnapshot* snapshot, const Cursor& cursor);

}  // namespace kvscope::ui
