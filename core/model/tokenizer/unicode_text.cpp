#include "core/model/tokenizer/unicode_text.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/error.h"

namespace kvscope {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool isContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The allowed range of the second byte depends on the lead byte: this is
// what excludes overlong forms, surrogates and code points above U+10FFFF.
void secondByteRange(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0) lo = 0xA0;
  if (lead == 0xED) hi = 0x9F;
  if (lead == 0xF0) lo = 0x90;
  if (lead == 0xF4) hi = 0x8F;
}

size_t sequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

Utf8Step utf8Step(const std::string& text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t need = sequenceLength(lead);
  if (need == 1) return {lead, 1, true};
  if (need == 0) return {kReplacement, 1, false};
  unsigned char lo = 0, hi = 0;
  secondByteRange(lead, lo, hi);
  char32_t cp = lead & (0xFF >> (need + 1));
  size_t len = 1;
  while (len < need && pos + len < text.size()) {
    const auto b = static_cast<unsigned char>(text[pos + len]);
    const bool ok = len == 1 ? (b >= lo && b <= hi) : isContinuation(b);
    if (!ok) break;
    cp = (cp << 6) | (b & 0x3F);
    ++len;
  }
  if (len < need) return {kReplacement, len, false};
  return {cp, len, true};
}

void appendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool isValidUtf8(const std::string& bytes) {
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Step step = utf8Step(bytes, pos);
    if (!step.valid) return false;
    pos += step.length;
  }
  return true;
}

std::string utf8Lossy(const std::string& bytes) {
  if (isValidUtf8(bytes)) return bytes;
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Step step = utf8Step(bytes, pos);
    if (step.valid) {
      out.append(bytes, pos, step.length);
    } else {
      appendUtf8(out, kReplacement);
    }
    pos += step.length;
  }
  return out;
}

bool isWhitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

bool isAlphanumeric(char32_t c) {
  return u_isUAlphabetic(static_cast<UChar32>(c)) || isNumeric(c);
}

bool isNumeric(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0;
}

std::string normalizeUnicode(const std::string& text, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::NFC: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::NFD: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::NFKC: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::NFKD: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status)) fail("unicode normalization", u_errorName(status));
  const icu::UnicodeString normalized =
      normalizer->normalize(icu::UnicodeString::fromUTF8(text), status);
  if (U_FAILURE(status)) fail("unicode normalization", u_errorName(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

std::string toLowerUnicode(const std::string& text) {
  icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(text);
  unicode.toLower(icu::Locale::getRoot());
  std::string out;
  unicode.toUTF8String(out);
  return out;
}

}  // namespace kvscope
