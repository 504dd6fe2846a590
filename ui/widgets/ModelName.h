#pragma once
// A model named by its role without saying a word twice: the bundled pair
// live in directories called "target" and "drafter", and the core describes
// a drafter as "model drafter <name>", so "target %1" and "drafter %1" read
// "target target" and "drafter model drafter drafter". Repeated words go, and
// the role is said once.
#include <QString>

namespace kvscope::ui {

// "target llama-tiny", "target" (for "target"), "model drafter" (for "drafter", "model drafter drafter").
QString modelWithRole(const QString& role, const QString& name);

}  // namespace kvscope::ui
