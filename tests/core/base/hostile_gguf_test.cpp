// Hostile GGUF files: every file of fuzz/regression/gguf/ (made by
// fuzz/make_gguf_regression.py, plus what the fuzzer found) is refused with
// an Error naming the file and the field, within the CPU and memory budgets,
// or, for the few valid ones, read with its strings kept as they are.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_vocab.h"
#include "core/model/tokenizer/visible_text.h"
#include "tests/core/base/hostile_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using hostile::expectRefused;

const fs::path kCorpus = fs::path(KVSCOPE_FIXTURES) / ".." / ".." / "fuzz" / "regression" / "gguf";

std::string corpusFile(const std::string& name) { return (kCorpus / name).string(); }

// What each file's error must say (besides its path).
const std::map<std::string, std::vector<std::string>>& expectedRefusals() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"bad_magic.gguf", {"not a GGUF file (bad magic)"}},
      {"version_0.gguf", {"GGUF version 0 (2 and 3 are read)"}},
      {"version_4.gguf", {"GGUF version 4"}},
      {"version_huge.gguf", {"GGUF version 4294967295"}},
      {"tensor_count_2p63.gguf", {"the tensor count 9223372036854775808 exceeds what the", "bytes left can hold"}},
      {"kv_count_2p63.gguf", {"the metadata count 9223372036854775808 exceeds what the", "bytes left can hold"}},
      {"tensor_count_past_metadata.gguf", {"the tensor count 20 exceeds what the", "after the metadata can hold"}},
      {"key_length_past_end.gguf", {"metadata key 0: string length 1000 exceeds the", "bytes left"}},
      {"key_length_2p62.gguf", {"metadata key 0: string length 4611686018427387904 exceeds"}},
      {"string_value_past_end.gguf", {"the value of metadata 'general.architecture': string length 5000 exceeds"}},
      {"string_value_2p62.gguf", {"'general.architecture': string length 4611686018427387904 exceeds"}},
      {"tensor_name_length_2p62.gguf", {"the name of tensor 0: string length 4611686018427387904 exceeds"}},
      {"array_2p40_u8.gguf", {"metadata 'tokenizer.ggml.token_type': array of 1099511627776 u8 elements exceeds the"}},
      {"array_2p40_strings.gguf", {"metadata 'tokenizer.ggml.tokens': array of 1099511627776 string elements exceeds the"}},
      {"nested_array.gguf", {"metadata 'general.nested': an array of arrays"}},
      {"unknown_value_type_13.gguf", {"metadata 'general.x': unknown value type 13"}},
      {"unknown_value_type_huge.gguf", {"metadata 'general.x': unknown value type 4294967295"}},
      {"unknown_array_element_type.gguf", {"metadata 'general.x': unknown value type 77"}},
      {"bool_value_2.gguf", {"metadata 'general.flag': bool value 2"}},
      {"u64_value_2p63.gguf", {"metadata 'general.size': u64 value 9223372036854775808"}},
      {"tensor_offset_past_file.gguf", {"tensor 'blk.0.attn_q.weight': 32 bytes at offset 1048576 run past the end of the file"}},
      {"tensor_offset_2p64_minus_32.gguf", {"tensor 'blk.0.attn_q.weight': 32 bytes at offset 18446744073709551584 run past"}},
      {"tensors_overlapping.gguf", {"tensors 'token_embd.weight' and 'output_norm.weight' overlap"}},
      {"tensor_offset_unaligned.gguf", {"tensor 'output_norm.weight': offset 65 is not a multiple of the alignment 32"}},
      {"dim_zero.gguf", {"tensor 'token_embd.weight': dimension 1 is 0"}},
      {"dims_product_overflow.gguf", {"tensor 'token_embd.weight': dimension 1 of 4294967296 makes more than 2^40 elements"}},
      {"dims_product_2p64_wraps_to_small.gguf", {"tensor 'token_embd.weight': dimension 1 of 4294967296 makes more than 2^40"}},
      {"dim_2p63.gguf", {"tensor 'token_embd.weight': dimension 0 of 9223372036854775808 makes more than 2^40"}},
      {"n_dims_5.gguf", {"tensor 'token_embd.weight': 5 dimensions (1-4)"}},
      {"n_dims_0.gguf", {"tensor 'output_norm.weight': 0 dimensions (1-4)"}},
      {"n_dims_huge.gguf", {"tensor 't': 4294967295 dimensions (1-4)"}},
      {"ggml_type_unknown.gguf", {"tensor 'token_embd.weight': ggml type 99"}},
      {"ggml_type_quantized_q4_0.gguf", {"tensor 'token_embd.weight': ggml type 2 (quantized or unknown"}},
      {"tensor_name_empty.gguf", {"tensor 0: an empty name"}},
      {"tensor_name_100_bytes.gguf", {"tensor 'blk.xxxx", "...' (100 bytes): a name of 100 bytes (llama.cpp's limit is 63)"}},
      {"duplicate_key.gguf", {"metadata key 'general.architecture' appears twice"}},
      {"duplicate_tensor_name.gguf", {"tensor 'token_embd.weight' appears twice"}},
      {"alignment_0.gguf", {"general.alignment 0 is not a power of two"}},
      {"alignment_3.gguf", {"general.alignment 3 is not a power of two"}},
      {"alignment_as_string.gguf", {"general.alignment must be a u32, not a string"}},
      {"alignment_as_array.gguf", {"general.alignment must be a u32, not an array"}},
      {"empty.gguf", {"the file ends inside the magic (offset 0)"}},
      {"truncated_before_counts.gguf", {"the file ends inside the tensor count (offset 8)"}},
      {"truncated_before_metadata.gguf", {"the tensor count 3 exceeds what the 8 bytes left can hold"}},
      {"truncated_inside_metadata.gguf", {"metadata 'tokenizer.ggml.tokens': array of 4 string elements exceeds the 20 bytes left"}},
      {"truncated_before_tensor_infos.gguf", {"the tensor count 3 exceeds what the 0 bytes left after the metadata can hold"}},
      {"truncated_inside_tensor_infos.gguf", {"the file ends inside the offset of tensor 'blk.0.attn_q.weight'"}},
      {"truncated_before_padding.gguf", {"the file ends inside the padding before the data section"}},
      {"truncated_before_data.gguf", {"tensor 'token_embd.weight': 64 bytes at offset 0 run past the end of the file",
                                      "the data section holds 0 bytes"}},
      {"truncated_inside_data.gguf", {"tensor 'output_norm.weight': 8 bytes at offset 64 run past the end of the file"}},
      {"truncated_one_byte_short.gguf", {"tensor 'blk.0.attn_q.weight'", "run past the end of the file"}},
      {"vocab_token_type_length_mismatch.gguf",
       {"tokenizer.ggml.token_type has 3 entries for the 4 tokens of tokenizer.ggml.tokens"}},
      {"vocab_scores_length_mismatch.gguf", {"tokenizer.ggml.scores has 7 entries for the 4 tokens"}},
      {"vocab_scores_as_strings.gguf", {"tokenizer.ggml.scores must be an array of f32, not an array of string"}},
      {"vocab_tokens_not_strings.gguf", {"tokenizer.ggml.tokens must be an array of strings, not an array of i32"}},
      {"vocab_tokens_empty.gguf", {"tokenizer.ggml.tokens is empty"}},
      {"vocab_token_type_7.gguf", {"tokenizer.ggml.token_type[2] is 7 (llama.cpp's token types are 0-6)"}},
      {"vocab_bos_outside.gguf", {"tokenizer.ggml.bos_token_id 4 is outside the vocabulary of 4 tokens"}},
      {"vocab_eos_as_string.gguf", {"tokenizer.ggml.eos_token_id must be an integer, not a string"}},
      {"vocab_merge_without_space.gguf", {"tokenizer.ggml.merges[0] 'ab' is not two tokens separated by a space"}},
      {"vocab_scores_without_tokens.gguf", {"'tokenizer.ggml.scores' without tokenizer.ggml.tokens"}},
      {"vocab_bos_without_tokens.gguf", {"'tokenizer.ggml.bos_token_id' without tokenizer.ggml.tokens"}},
      {"vocab_model_as_array.gguf", {"tokenizer.ggml.model must be a string, not an array of string"}},
      {"duplicate_key_with_escapes.gguf", {"metadata key '\\x1b[5mgeneral.x\\x1b[0m' appears twice"}},
      {"tensor_name_with_escapes_quantized.gguf", {"tensor '\\x1b[2J\\x1b[31mred': ggml type 8"}},
  };
  return table;
}

// The files that are valid GGUF: read, not refused.
const std::set<std::string> kValid = {"valid_small.gguf", "token_text_markup_and_escapes.gguf"};

TEST(HostileGguf, EveryRegressionFileIsRefusedNamingTheField) {
  ASSERT_TRUE(fs::is_directory(kCorpus)) << kCorpus;
  size_t refused = 0;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    const std::string name = entry.path().filename().string();
    if (kValid.count(name)) continue;
    const auto it = expectedRefusals().find(name);
    if (it == expectedRefusals().end()) {
      ADD_FAILURE() << name << " is in the corpus but not in this test's table: add the error it must give";
      continue;
    }
    std::vector<std::string> parts = it->second;
    parts.push_back(entry.path().string());
    SCOPED_TRACE(name);
    const std::string message = expectRefused([&] { readGguf(entry.path().string()); }, parts);
    for (const char c : {'\x1b', '\r', '\x07'}) EXPECT_EQ(message.find(c), std::string::npos) << message;
    ++refused;
  }
  EXPECT_EQ(refused, expectedRefusals().size()) << "a file of the table is missing from " << kCorpus;
}

TEST(HostileGguf, ValidSmallFileReadsEveryField) {
  const std::string path = corpusFile("valid_small.gguf");
  const GgufFile f = readGguf(path);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.text("general.architecture"), "llama");
  EXPECT_EQ(checkGgufVocab(f), 4);
  ASSERT_EQ(f.tensors.size(), 3u);
  const auto* embd = f.tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne, (std::vector<uint64_t>{4, 4}));
  // The generator's values (seeded by the data bytes before each tensor):
  // f32 0.25 * i, f16 0.5 * (i - 64), bf16 i + 72.
  EXPECT_EQ(readGgufFloats(path, f, *embd, 0, 3), (std::vector<float>{0.0f, 0.25f, 0.5f}));
  EXPECT_EQ(readGgufFloats(path, f, *f.tensor("output_norm.weight"), 1, 2), (std::vector<float>{-31.5f, -31.0f}));
  EXPECT_EQ(readGgufFloats(path, f, *f.tensor("blk.0.attn_q.weight"), 15, 1), (std::vector<float>{87.0f}));
  expectRefused([&] { readGgufFloats(path, f, *embd, 15, 2); }, {path, "elements [15, +2) of tensor 'token_embd.weight' (it has 16)"});
}

// Token texts may hold anything (llama.cpp's vocabularies have "\n" and
// "<|im_start|>" tokens): read byte for byte, shown escaped.
TEST(HostileGguf, MarkupAndEscapesInTokenTextAreKeptAndShownEscaped) {
  const GgufFile f = readGguf(corpusFile("token_text_markup_and_escapes.gguf"));
  const auto& tokens = f.find("tokenizer.ggml.tokens")->strings;
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[0], "<img src=\"/dev/zero\">");
  EXPECT_EQ(tokens[1], "\x1b[5m\x1b[31mblink\x1b[0m");
  EXPECT_EQ(visibleText(tokens[1]), "\\x1b[5m\\x1b[31mblink\\x1b[0m");
  EXPECT_EQ(visibleText(f.text("general.architecture")), "<h1>llama</h1>\\x1b]0;title\\x07");
}

// Counts and lengths at the limits, made here (2^24 + 1 elements is 16 MB:
// not committed).
TEST(HostileGguf, ArrayLongerThanTheLimitIsRefusedBeforeReading) {
  std::string bytes = "GGUF";
  auto u32 = [&](uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3), u64(0), u64(1), u64(10);
  bytes += "general.xy";
  u32(9), u32(0), u64((uint64_t{1} << 24) + 1);
  bytes.append((size_t{1} << 24) + 1, '\0');
  const fs::path path = fs::temp_directory_path() / "kvscope-hostile-gguf-limit.gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  bytes.clear();
  bytes.shrink_to_fit();
  expectRefused([&] { readGguf(path.string()); }, {"metadata 'general.xy': array of 16777217 elements exceeds the limit of 16777216"});
  fs::remove(path);
}

}  // namespace
}  // namespace kvscope
