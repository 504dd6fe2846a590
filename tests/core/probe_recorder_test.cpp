// The one probe recorder (core/model/probe_recorder.h): it keeps only the
// points (and, when asked, the layer) it was given, copies what it keeps
// (the forward may overwrite its buffers after the call), stores float32
// except bool masks, and names the layer and the point when asked for one
// the forward did not record.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>

#include "core/error.h"
#include "core/model/probe_recorder.h"

namespace kvscope::probe_recorder_test {
namespace {

TEST(ProbeRecorder, EveryLayerKeepsOnlyItsPoints) {
  ProbeRecorder recorder({Probe::Key, Probe::Value});
  EXPECT_TRUE(recorder.wants(Probe::Key, 0));
  EXPECT_TRUE(recorder.wants(Probe::Value, 7));
  EXPECT_FALSE(recorder.wants(Probe::Query, 0));
  recorder.record(Probe::Key, 2, torch::ones({2, 3, 4}));
  const auto keys = recorder.perLayer(Probe::Key);
  ASSERT_EQ(keys.size(), 3u);  // up to the last layer recorded
  EXPECT_FALSE(keys[0].defined());
  EXPECT_TRUE(keys[2].defined());
  EXPECT_TRUE(recorder.perLayer(Probe::Value).empty());
  EXPECT_TRUE(recorder.has(Probe::Key, 2));
  EXPECT_FALSE(recorder.has(Probe::Key, 1));
  EXPECT_FALSE(recorder.has(Probe::Key, 3));
}

TEST(ProbeRecorder, OneLayerIgnoresTheOthers) {
  ProbeRecorder recorder(1, {Probe::AttentionWeights});
  EXPECT_TRUE(recorder.wants(Probe::AttentionWeights, 1));
  EXPECT_FALSE(recorder.wants(Probe::AttentionWeights, 0));
  EXPECT_FALSE(recorder.wants(Probe::AttentionOutput, 1));
}

TEST(ProbeRecorder, KeepsAFloat32CopyAndBoolMasks) {
  ProbeRecorder recorder({Probe::Query, Probe::AttentionMask});
  auto query = torch::full({1, 2, 2}, 0.5, torch::kFloat16);  // [heads, n, head_dim]
  auto mask = torch::tensor({true, false}).reshape({1, 2});   // [n, keys]
  recorder.record(Probe::Query, 0, query);
  recorder.record(Probe::AttentionMask, 0, mask);
  query.fill_(9);  // the forward reuses its buffer
  mask.fill_(true);
  const auto& kept = recorder.get(Probe::Query, 0);
  EXPECT_EQ(kept.scalar_type(), torch::kFloat32);
  EXPECT_EQ(kept.max().item<float>(), 0.5f);
  const auto& kept_mask = recorder.get(Probe::AttentionMask, 0);
  EXPECT_EQ(kept_mask.scalar_type(), torch::kBool);
  EXPECT_FALSE(kept_mask[0][1].item<bool>());
}

TEST(ProbeRecorder, AMissingPointIsAnErrorNamingIt) {
  ProbeRecorder recorder(3, {Probe::AttentionOutput});
  try {
    recorder.get(Probe::AttentionOutput, 3);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 3"), std::string::npos) << what;
    EXPECT_NE(what.find(probeName(Probe::AttentionOutput)), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kvscope::probe_recorder_test
