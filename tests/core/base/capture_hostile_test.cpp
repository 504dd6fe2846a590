// The hostile captures of fuzz/regression/capture/hostile_* and batch_*
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

}  // namespace
}  // namespace kvscope
