#include "ui/widgets/LongText.h"

#include <QLocale>

namespace kvscope::ui {

namespace {

bool continuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

QString decoded(std::string_view bytes) { return QString::fromUtf8(bytes.data(), static_cast<qsizetype>(bytes.size())); }

}  // namespace

QString elidedForDisplay(std::string_view text, size_t limit, bool* elided) {
  if (elided) *elided = text.size() > limit;
  if (text.size() <= limit) return decoded(text);
  // Cut at character starts, so no character is split into replacement marks.
  size_t head = limit - limit / 4;
  while (head > 0 && continuationByte(text[head])) --head;
  size_t tail_start = text.size() - limit / 4;
  while (tail_start < text.size() && continuationByte(text[tail_start])) ++tail_start;
  const size_t hidden = tail_start - head;
  return decoded(text.substr(0, head)) +
         QStringLiteral(" \u2026 (%1 bytes not shown) \u2026 ").arg(QLocale(QLocale::English, QLocale::UnitedStates).toString(static_cast<qulonglong>(hidden))) +
         decoded(text.substr(tail_start));
}

}  // namespace kvscope::ui
