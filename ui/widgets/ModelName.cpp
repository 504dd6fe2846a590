#include "ui/widgets/ModelName.h"

#include <QStringList>

namespace kvscope::ui {

QString modelWithRole(const QString& role, const QString& name) {
  QStringList words;
  for (const QString& word : name.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
    if (words.isEmpty() || words.back().compare(word, Qt::CaseInsensitive) != 0) words << word;
  }
  if (words.isEmpty()) return role;
  for (const QString& word : words) {
    if (word.compare(role, Qt::CaseInsensitive) == 0) return words.join(QLatin1Char(' '));  // the name says its role
  }
  return role + QLatin1Char(' ') + words.join(QLatin1Char(' '));
}

}  // namespace kvscope::ui
