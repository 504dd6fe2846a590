// The hostile captures of fuzz/regression/capture/hostile_*, batch_*, paged_* and recurrent_*
// (written by fuzz/make_capture_regression.py): files that once passed
// CaptureFile::open and then cost the timeline, the check or the GUI
// gigabytes, minutes or a libtorch backtrace. Each is refused at open now,
// with an Error naming the field and the bound, within the hostile-input
// budgets; the files open accepts still open.
#include <gtest/gtest.h>

#include "core/capture/capture_file.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

const std::string kCorpus = std::string(KVSCOPE_FIXTURES) + "/../../fuzz/regression/capture/";

void expectRefusedAtOpen(const std::string& name, const std::vector<std::string>& parts) {
  SCOPED_TRACE(name);
  std::vector<std::string> all{name};
  all.insert(all.end(), parts.begin(), parts.end());
  hostile::expectRefused([&] { CaptureFile::open(kCorpus + name); }, all);
}

TEST(CaptureHostile, ValidFilesOfTheGeneratorOpen) {
  for (const char* name : {"hostile_valid_static", "hostile_static_2_20_slots_attended", "batch_valid"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(CaptureFile::open(kCorpus + name));
  }
}

TEST(CaptureHostile, SlotsOfAStateAcrossLayersAreBounded) {
  const std::string per_state = "the limit is 1048576 per state";
  expectRefusedAtOpen("hostile_static_6_layers_2_24_slots",
                      {"call 0 (target index 0): before.layers[0]", "16777216 across its layers", per_state});
  expectRefusedAtOpen("hostile_static_6_layers_2_18_slots",
                      {"call 0 (target index 0): before.layers[4]", "1310720 across its layers", per_state});
  expectRefusedAtOpen("hostile_static_1024_layers_2_24_slots", {"before.layers[0]", per_state});
}

TEST(CaptureHostile, SlotsOfEveryStateTogetherAreBounded) {
  expectRefusedAtOpen("hostile_slots_across_calls",
                      {"brings the slots of the capture's states to", "the limit is 16777216"});
}

TEST(CaptureHostile, FreeTextIsBounded) {
  expectRefusedAtOpen("hostile_engine_name_1mb", {"engine.name is 1048576 bytes long, the limit is 4096"});
  expectRefusedAtOpen("hostile_between_what_long", {"between.what is 5000 bytes long"});
  expectRefusedAtOpen("hostile_name_or_path_long", {"models.target.name_or_path is 6000 bytes long"});
  expectRefusedAtOpen("batch_engine_name_bidi_long", {"engine.name is 15000 bytes long"});
}

TEST(CaptureHostile, PositionsAreBoundedByName) {
  expectRefusedAtOpen("hostile_cache_position_int64_max", {"cache_position", "9223372036854775807"});
  expectRefusedAtOpen("hostile_positions_int64_max", {"positions", "9223372036854775807"});
  expectRefusedAtOpen("hostile_positions_2_31", {"positions", "2147483648"});
  expectRefusedAtOpen("batch_cache_position_int64_max", {"cache_position"});
  expectRefusedAtOpen("batch_positions_int64_max_row1", {"positions[1]"});
}

TEST(CaptureHostile, TopIdsAreInTheLargestVocabularyWithoutAVocabSize) {
  expectRefusedAtOpen("hostile_top_ids_negative", {"logits top id -7", "no vocab_size given"});
  expectRefusedAtOpen("hostile_top_ids_2_31_minus_1", {"logits top id 2147483647", "[0, 16777216)"});
  expectRefusedAtOpen("hostile_top_ids_past_vocab", {"logits top id 16", "outside vocab_size 16"});
  expectRefusedAtOpen("batch_top_ids_negative", {"logits top id -7"});
}

TEST(CaptureHostile, TokenIdsAreInTheLargestVocabularyWithoutAVocabSize) {
  expectRefusedAtOpen("hostile_committed_2_40", {"committed", "1099511627776"});
  expectRefusedAtOpen("hostile_input_id_2_40", {"input_ids", "1099511627776"});
}

// Version 3's paged pools (paged_*): bounds and pool slots by name.
TEST(CaptureHostile, PagedPoolsAreBoundedByName) {
  EXPECT_NO_THROW(CaptureFile::open(kCorpus + "paged_valid"));
  const std::string at = "call 1 (target index 1): after.paged";
  expectRefusedAtOpen("paged_block_size_zero", {at + ".block_size must be an integer in [1, 65536]"});
  expectRefusedAtOpen("paged_block_size_2_40", {at + ".block_size must be an integer in [1, 65536]"});
  expectRefusedAtOpen("paged_num_blocks_negative", {at + ".num_blocks must be an integer in [1, 1073741824]"});
  expectRefusedAtOpen("paged_pool_past_2_30", {at + ": 1048576 blocks of 65536 rows", "1073741824 pool slots"});
  expectRefusedAtOpen("paged_slot_past_pool", {at + ".layers[0][1] run 0 runs to pool slot 9"});
  expectRefusedAtOpen("paged_slot_int64_max", {at + ".layers[0][1] run 0 first must be an integer in [-2, 7]"});
  expectRefusedAtOpen("paged_count_2_40", {at + ".layers[0][1] run 0 count must be an integer in [1, 4]"});
  expectRefusedAtOpen("paged_slots_not_tiled", {at + ".layers[0][1] covers 3 slots where the layer has 4"});
  expectRefusedAtOpen("paged_padding_moved", {at + ".layers[0][1] slot 0 is padding where the layer holds a row"});
  expectRefusedAtOpen("paged_runs_past_slots", {at + ".layers[0][1] has 100000 runs, more than its 4 slots"});
  expectRefusedAtOpen("paged_free_past_pool", {at + ".free run 0 count must be an integer in [1, 4]"});
  expectRefusedAtOpen("paged_in_version_2", {at + " is a version 3 field; this file is version 2"});
}

// Version 3's recurrent states (recurrent_*): ids, layers, kinds and provenance by name.
TEST(CaptureHostile, RecurrentStatesAreBoundedByName) {
  const auto valid = CaptureFile::open(kCorpus + "recurrent_valid");
  const auto& states = valid->manifest().recurrent_states[static_cast<int>(CaptureRole::Target)];
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(states[1].kind, CaptureStateKind::Ssm);
  EXPECT_EQ(states[2].after_position, 2);
  ASSERT_TRUE(valid->manifest().calls[1].recurrent && valid->manifest().calls[1].recurrent->before);
  EXPECT_EQ((*valid->manifest().calls[1].recurrent->before)[1][1].id, 3);
  const std::string states_at = "recurrent_states.target";
  const std::string call_at = "call 1 (target index 1): recurrent";
  expectRefusedAtOpen("recurrent_id_out_of_order", {states_at + "[1].id is 7 where 1 was due"});
  expectRefusedAtOpen("recurrent_layer_past_model", {states_at + "[0].layer must be an integer in [0, 0]"});
  expectRefusedAtOpen("recurrent_kind_unknown", {states_at + "[0].kind must be \"conv\" or \"ssm\""});
  expectRefusedAtOpen("recurrent_from_later", {states_at + "[0].from is 2, not an earlier state"});
  expectRefusedAtOpen("recurrent_from_self_cycle", {states_at + "[2].from is 2, not an earlier state"});
  expectRefusedAtOpen("recurrent_position_huge", {states_at + "[0].after_position must be an integer in [0, 2147483647]"});
  expectRefusedAtOpen("recurrent_half_provenance", {states_at + "[0]: call, input and after_position are all set"});
  expectRefusedAtOpen("recurrent_state_not_an_object", {states_at + "[0] must be an object"});
  expectRefusedAtOpen("recurrent_id_unknown", {call_at + ".before[0][0].id must be an integer in [0, 3]"});
  expectRefusedAtOpen("recurrent_id_other_kind", {call_at + ".before[0][0].id is state 1 of layer 0 (ssm)"});
  expectRefusedAtOpen("recurrent_sequences", {call_at + ".before must be null or a list of 2 lists"});
  expectRefusedAtOpen("recurrent_entries_amplified", {call_at + ".before[0] must be a list of at most 2 states"});
  expectRefusedAtOpen("recurrent_intermediate_count", {call_at + ".intermediate[0][0].ids must be a list of 1 ids"});
  expectRefusedAtOpen("recurrent_in_version_2", {"recurrent_states is a version 3 field; this file is version 2"});
}

}  // namespace
}  // namespace kvscope
