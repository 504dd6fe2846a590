// What changed between two calls, derived from the two states alone
// (docs/capture-format.md, section 6).
#include <gtest/gtest.h>

#include "core/capture/capture_change.h"

namespace kvscope {
namespace {

TEST(CaptureChangeTest, SameSlotsAreNoChange) {
  EXPECT_EQ(deriveChange({0, 1, 2}, {0, 1, 2}), CaptureBetweenKind::None);
  EXPECT_EQ(deriveChange({}, {}), CaptureBetweenKind::None);
  EXPECT_EQ(deriveChange({-1, -1}, {-1, -1}), CaptureBetweenKind::None);
}

TEST(CaptureChangeTest, APrefixIsACrop) {
  EXPECT_EQ(deriveChange({0, 1, 2, 3}, {0, 1}), CaptureBetweenKind::Crop);
}

TEST(CaptureChangeTest, NothingLeftIsAReset) {
  EXPECT_EQ(deriveChange({0, 1}, {}), CaptureBetweenKind::Reset);
  EXPECT_EQ(deriveChange({0, 1, -1}, {-1, -1, -1}), CaptureBetweenKind::Reset);  // a static cache zeroed
}

TEST(CaptureChangeTest, ASubSequenceThatIsNotAPrefixIsASlice) {
  EXPECT_EQ(deriveChange({0, 1, 2, 3}, {0, 2}), CaptureBetweenKind::Slice);
  EXPECT_EQ(deriveChange({0, 1, 2, 3}, {1, 2, 3}), CaptureBetweenKind::Slice);
}

TEST(CaptureChangeTest, SameRowsInOtherSlotsAreARoll) {
  EXPECT_EQ(deriveChange({0, 1, 2}, {1, 2, 0}), CaptureBetweenKind::Roll);
}

TEST(CaptureChangeTest, ARowNobodyReturnedIsAnOverwrite) {
  EXPECT_EQ(deriveChange({0, 1, 2}, {0, 7, 2}), CaptureBetweenKind::Overwrite);
}

TEST(CaptureChangeTest, AnythingElseIsAReplace) {
  EXPECT_EQ(deriveChange({0, 1}, {0, 1, 5}), CaptureBetweenKind::Replace);  // grew between calls
  EXPECT_EQ(deriveChange({0, 1, 2}, {2, 0}), CaptureBetweenKind::Replace);  // reordered and cut
}

TEST(CaptureChangeTest, AStateChangesAsItsFirstChangedLayer) {
  EXPECT_EQ(deriveStateChange({{0, 1}, {0, 1}}, {{0, 1}, {0}}), CaptureBetweenKind::Crop);
  EXPECT_EQ(deriveStateChange({{0, 1}, {0, 1}}, {{0, 1}, {0, 1}}), CaptureBetweenKind::None);
}

}  // namespace
}  // namespace kvscope
