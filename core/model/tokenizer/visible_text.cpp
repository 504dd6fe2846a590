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

// Characters that reorder or break the text around them without being seen:
// the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069),
// the directional marks (U+200E, U+200F, U+061C) and the line and paragraph
// separators (U+2028, U+2029). A right-to-left override in a file's name can
// make an error read as something else ("Trojan Source").
bool invisibleFormat(const std::string& text, size_t i, size_t length) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  if (length == 2) return at(0) == 0xD8 && at(1) == 0x9C;  // U+061C
  if (length != 3 || at(0) != 0xE2) return false;
  const uint8_t b1 = at(1), b2 = at(2);
  if (b1 == 0x80) return b2 == 0x8E || b2 == 0x8F || (b2 >= 0xA8 && b2 <= 0xAE);  // U+200E/F, U+2028-U+202E
  return b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9;                                   // U+2066-U+2069
}

// "\u202e": the code point of a 2- or 3-byte sequence.
void appendCodePoint(std::string& out, const std::string& text, size_t i, size_t length) {
  const auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(text[i + k])); };
  const uint32_t code = length == 2 ? ((at(0) & 0x1F) << 6) | (at(1) & 0x3F)
                                    : ((at(0) & 0x0F) << 12) | ((at(1) & 0x3F) << 6) | (at(2) & 0x3F);
  char escape[8];
  std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(code));
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
    if (invisibleFormat(text, i, length)) {
      appendCodePoint(out, text, i, length);
    } else {
      out.append(text, i, length);
    }
    i += length;
  }
  return out;
}

}  // namespace kvscope
