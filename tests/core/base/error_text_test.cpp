// Error messages as the CLI and the GUI show them (core/error_text.h):
// clipped with how much was left out, and escaped line by line.
#include <gtest/gtest.h>

#include "core/error_text.h"

namespace kvscope {
namespace {

TEST(ErrorTextTest, ShortMessagesPassUnchanged) {
  EXPECT_EQ(displayableError("capture.kvcapture: calls must be a list"), "capture.kvcapture: calls must be a list");
  EXPECT_EQ(displayableError("first line\nsecond line"), "first line\nsecond line");
}

TEST(ErrorTextTest, LongMessagesAreClippedWithTheCountLeftOut) {
  const std::string message = "engine.name '" + std::string(5 << 20, 'k') + "'";
  const std::string shown = displayableError(message);
  EXPECT_LT(shown.size(), kMaxErrorBytes + 64);
  EXPECT_EQ(shown.substr(0, 13), "engine.name '");
  EXPECT_NE(shown.find("\u2026 (" + std::to_string(message.size() - kMaxErrorBytes) + " bytes more)"), std::string::npos)
      << shown.substr(shown.size() - 40);
}

TEST(ErrorTextTest, ClippingKeepsWholeCharacters) {
  // "é" is two bytes: a cut after 5 bytes would split the third.
  const std::string shown = displayableError("\u00e9\u00e9\u00e9\u00e9", 5);
  EXPECT_EQ(shown, "\u00e9\u00e9\u2026 (4 bytes more)");
}

TEST(ErrorTextTest, ControlAndBidiCharactersAreEscapedOnEachLine) {
  EXPECT_EQ(displayableError("tensor '\x1b[2Jx'\nmodel '\u202Eftl'"), "tensor '\\x1b[2Jx'\nmodel '\\u202eftl'");
}

}  // namespace
}  // namespace kvscope
