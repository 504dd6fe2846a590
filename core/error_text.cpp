#include "core/error_text.h"

#include "core/model/tokenizer/visible_text.h"

namespace kvscope {
namespace {

// The first `max_bytes` bytes of `text`, moved back to the start of a UTF-8
// character, and a note of how much was left out.
std::string clipped(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // a continuation byte
  return text.substr(0, end) + "\u2026 (" + std::to_string(text.size() - end) + " bytes more)";
}

}  // namespace

std::string displayableError(const std::string& message, size_t max_bytes) {
  const std::string text = clipped(message, max_bytes);
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    out += visibleText(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    out += '\n';
    start = end + 1;
  }
}

}  // namespace kvscope
