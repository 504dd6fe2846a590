// The hostile captures of fuzz/regression/capture/hostile_*, batch_* and paged_*
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

}  // namespace
}  // namespace kvscope
