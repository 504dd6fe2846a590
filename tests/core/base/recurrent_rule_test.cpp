// The recurrent-state rule (core/check/recurrent_rule.h) on hand-built
// manifests: a prefill from the initial state, then a verify of [pending, d1, d2]
// at positions 3..5 with one draft accepted; the next call at position 5 must
// resume from the state after position 4.
#include <gtest/gtest.h>

#include "core/check/recurrent_rule.h"

namespace kvscope {
namespace {

CaptureCall call(int64_t index, std::vector<int64_t> ids, int64_t first, std::vector<CaptureStateRef> before) {
  CaptureCall c;
  c.index = index;
  c.input_ids = std::move(ids);
  for (size_t i = 0; i < c.input_ids.size(); ++i) c.positions.push_back(first + static_cast<int64_t>(i));
  c.recurrent = CaptureCallRecurrent{};
  c.recurrent->before.emplace(1, std::move(before));
  return c;
}

CaptureRecurrentState computed(int64_t layer, CaptureStateKind kind, int64_t call, int64_t input,
                               std::optional<int64_t> from, int64_t after) {
  return {layer, kind, call, input, from, after};
}

// States: 0 / 1 initial (conv / ssm); 2 / 3 after the prefill (position 2);
// 4..6 conv and 7..9 ssm after each verify input (positions 3, 4, 5).
CaptureManifest manifest() {
  using K = CaptureStateKind;
  CaptureManifest m;
  m.committed = std::vector<int64_t>{10, 11, 12, 13, 14, 30};  // d1 = 14 kept, d2 = 15 rejected, 30 the bonus
  auto& states = m.recurrent_states[static_cast<int>(CaptureRole::Target)];
  states = {{0, K::Conv, {}, {}, {}, {}}, {0, K::Ssm, {}, {}, {}, {}},
            computed(0, K::Conv, 0, 2, 0, 2), computed(0, K::Ssm, 0, 2, 1, 2)};
  for (int64_t i = 0; i < 3; ++i) states.push_back(computed(0, K::Conv, 1, i, 2, 3 + i));
  for (int64_t i = 0; i < 3; ++i) states.push_back(computed(0, K::Ssm, 1, i, 3, 3 + i));
  m.calls.push_back(call(0, {10, 11, 12}, 0, {{0, K::Conv, 0}, {0, K::Ssm, 1}}));
  m.calls.push_back(call(1, {13, 14, 15}, 3, {{0, K::Conv, 2}, {0, K::Ssm, 3}}));
  return m;
}

CaptureCall next(CaptureManifest& m, int64_t conv, int64_t ssm) {
  m.calls.push_back(call(2, {30}, 5, {{0, CaptureStateKind::Conv, conv}, {0, CaptureStateKind::Ssm, ssm}}));
  return m.calls.back();
}

TEST(RecurrentRule, TheStateAfterTheLastKeptInputPasses) {
  CaptureManifest m = manifest();
  for (const auto& c : m.calls) EXPECT_FALSE(recurrentBreach(m, c).has_value());
  EXPECT_FALSE(recurrentBreach(m, next(m, 5, 8)).has_value());
}

TEST(RecurrentRule, AStateKeptAfterTheVerifyHoldsTheRejectedDraft) {
  CaptureManifest m = manifest();
  const auto breach = recurrentBreach(m, next(m, 6, 9));
  ASSERT_TRUE(breach.has_value());
  EXPECT_EQ(breach->kind, CaptureStateKind::Conv);
  EXPECT_EQ(breach->state_after, 5);
  EXPECT_EQ(breach->required_after, 4);
  EXPECT_EQ(breach->rejected_drafts_of, 1);
  EXPECT_EQ(breach->what, "target call 2 resumed from the conv state of layer 0 after position 5 (it includes the "
                          "rejected drafts of target call 1) where the state after position 4 was required");
}

TEST(RecurrentRule, AConvStateNotRestoredIsNamedThoughTheSsmStateIsRight) {
  CaptureManifest m = manifest();
  const auto breach = recurrentBreach(m, next(m, 6, 8));
  ASSERT_TRUE(breach.has_value());
  EXPECT_EQ(breach->kind, CaptureStateKind::Conv);
  CaptureManifest other = manifest();
  const auto ssm = recurrentBreach(other, next(other, 5, 9));
  ASSERT_TRUE(ssm.has_value());
  EXPECT_EQ(ssm->kind, CaptureStateKind::Ssm);
}

TEST(RecurrentRule, ASnapshotShiftedBackIsTheWrongPositionWithoutForeignTokens) {
  CaptureManifest m = manifest();
  const auto breach = recurrentBreach(m, next(m, 4, 7));  // the state after position 3: shifted by r = 1
  ASSERT_TRUE(breach.has_value());
  EXPECT_EQ(breach->state_after, 3);
  EXPECT_FALSE(breach->rejected_drafts_of.has_value());
}

TEST(RecurrentRule, AStateNoCallComputedIsNamedAsSuch) {
  CaptureManifest m = manifest();
  const auto breach = recurrentBreach(m, next(m, 0, 1));  // the initial state at position 5
  ASSERT_TRUE(breach.has_value());
  EXPECT_FALSE(breach->state_after.has_value());
  EXPECT_NE(breach->what.find("that no recorded call computed"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
