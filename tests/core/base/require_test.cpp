// require() (core/error.h): the plain form and the one whose message is
// built only when the check fails (used on every forward).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace kvscope {
namespace {

TEST(Require, ALazyMessageIsBuiltOnlyWhenTheCheckFails) {
  int built = 0;
  const auto message = [&] {
    ++built;
    return "layer " + std::to_string(3) + " holds positions up to 7";
  };
  EXPECT_NO_THROW(require(true, message));
  EXPECT_EQ(built, 0);
  try {
    require(false, message);
    FAIL() << "a failed check must throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "layer 3 holds positions up to 7");
  }
  EXPECT_EQ(built, 1);
}

TEST(Require, APlainMessageStillWorks) {
  EXPECT_NO_THROW(require(true, "never shown"));
  EXPECT_THROW(require(false, std::string("shown")), Error);
  try {
    require(false, "forward: no tokens to feed");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "forward: no tokens to feed");
  }
}

}  // namespace
}  // namespace kvscope
