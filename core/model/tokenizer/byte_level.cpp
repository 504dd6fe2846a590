#include "core/model/tokenizer/byte_level.h"

#include <array>

#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

bool mapsToItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// Byte b -> code point: itself when printable, else 256, 257, ... in byte order.
const std::array<char32_t, 256>& byteToChar() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = mapsToItself(b) ? char32_t(b) : next++;
    return t;
  }();
  return table;
}

const std::array<std::string, 256>& byteToUtf8() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) appendUtf8(t[b], byteToChar()[b]);
    return t;
  }();
  return table;
}

// The bytes that do not map to themselves, in order: char 256 + i is byte [i].
constexpr char32_t kRemapped = 68;
const std::array<uint8_t, kRemapped>& remappedBytes() {
  static const std::array<uint8_t, kRemapped> table = [] {
    std::array<uint8_t, kRemapped> t{};
    for (int b = 0; b < 256; ++b) {
      if (!mapsToItself(b)) t[byteToChar()[b] - 256] = static_cast<uint8_t>(b);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string bytesToByteLevel(const std::string& raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (const char c : raw) out += byteToUtf8()[static_cast<unsigned char>(c)];
  return out;
}

std::optional<uint8_t> byteLevelCharToByte(char32_t c) {
  if (c < 256 && mapsToItself(static_cast<int>(c))) return static_cast<uint8_t>(c);
  if (c < 256 || c >= 256 + kRemapped) return std::nullopt;
  return remappedBytes()[c - 256];
}

std::optional<std::string> byteLevelToBytes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8Step(text, pos);
    const std::optional<uint8_t> byte =
        step.valid ? byteLevelCharToByte(step.code_point) : std::nullopt;
    if (!byte) return std::nullopt;
    out += static_cast<char>(*byte);
    pos += step.length;
  }
  return out;
}

}  // namespace kvscope
