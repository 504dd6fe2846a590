#pragma once
// UTF-8 helpers for the tokenizer: walking code points, repairing invalid
// bytes the way Hugging Face (Rust String::from_utf8_lossy) does, character
// classes and Unicode normalization. The header is ICU-free on purpose so
// tests and other modules can use it without ICU's include paths.
#include <cstddef>
#include <string>

namespace kvscope {

// One step of UTF-8 decoding at pos: either a valid code point, or the
// maximal invalid subpart (which lossy decoding replaces by one U+FFFD).
struct Utf8Step {
  char32_t code_point;  // U+FFFD when !valid
  size_t length;        // bytes consumed, >= 1
  bool valid;
};
Utf8Step utf8Step(const std::string& text, size_t pos);

// Appends the UTF-8 encoding of one code point.
void appendUtf8(std::string& out, char32_t code_point);

bool isValidUtf8(const std::string& bytes);
// Replaces every invalid subpart by U+FFFD (Rust's from_utf8_lossy rule).
std::string utf8Lossy(const std::string& bytes);

// Character classes on code points (Unicode properties, as Rust's char has).
bool isWhitespace(char32_t c);   // White_Space
bool isAlphanumeric(char32_t c); // Alphabetic or Numeric
bool isNumeric(char32_t c);      // General_Category N*

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(const std::string& text, NormalForm form);
std::string toLowerUnicode(const std::string& text);

}  // namespace kvscope
