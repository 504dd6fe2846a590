// Text from files printed safely: no terminal control reaches the screen.
#include <gtest/gtest.h>

#include "core/model/tokenizer/visible_text.h"

namespace kvscope {
namespace {

TEST(VisibleTextTest, PrintableUtf8PassesUnchanged) {
  EXPECT_EQ(visibleText(" the"), " the");
  EXPECT_EQ(visibleText("größer ✓"), "größer ✓");
}

TEST(VisibleTextTest, ControlCharactersBecomeEscapes) {
  EXPECT_EQ(visibleText("\x1b[5mblink"), "\\x1b[5mblink");
  EXPECT_EQ(visibleText("a\nb\rc\x7f"), "a\\x0ab\\x0dc\\x7f");
  EXPECT_EQ(visibleText("\xc2\x9b" "2J"), "\\xc2\\x9b2J");  // C1 CSI
}

TEST(VisibleTextTest, InvalidUtf8BytesBecomeEscapes) {
  EXPECT_EQ(visibleText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(visibleText("\xe2\x9c"), "\\xe2\\x9c");  // a sequence cut short
}

TEST(VisibleTextTest, BidiControlsAndLineSeparatorsBecomeCodePoints) {
  // A right-to-left override would show "txt.exe" as "exe.txt" after it.
  EXPECT_EQ(visibleText("a\u202Etxt.exe"), "a\\u202etxt.exe");
  EXPECT_EQ(visibleText("\u2066x\u2069\u200F\u061C"), "\\u2066x\\u2069\\u200f\\u061c");
  EXPECT_EQ(visibleText("a\u2028b\u2029"), "a\\u2028b\\u2029");
  // Neighbours of the escaped ranges pass: an en dash, a bullet, U+2070.
  EXPECT_EQ(visibleText("\u2013 \u2022 \u2070"), "\u2013 \u2022 \u2070");
}

}  // namespace
}  // namespace kvscope
