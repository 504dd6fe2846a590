#include "core/model/tokenizer/visible_text.h"

#include <cstdint>
#include <cstdio>

namespace kvscope {
namespace {

// Length of the valid UTF-8 sequence starting at text[i] (0: invalid).
size_t utf8Length(const std::string& text, size_t i) {
  const auto lead = static_cast<uint8_t>(text[i]);
  const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<uint8_t>(text[i + k]) & 0xC0) != 0x80) return 0;
  }
  return length;
}

void appendEscape(std::string& out, uint8_t byte) {
  char escape[5];
  std::snprintf(escape, sizeof escape, "\\x%02x", byte);
  out += escape;
}

}  // namespace

std::string visibleText(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<uint8_t>(text[i]);
    const size_t length = utf8Length(text, i);
    // C1 controls (U+0080-U+009F) are two bytes, 0xC2 0x80-0x9F.
    const bool c1 = length == 2 && byte == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0;
    if (length == 0 || byte < 0x20 || byte == 0x7F || c1) {
      appendEscape(out, byte);
      ++i;
      continue;
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

}  // namespace kvscope
