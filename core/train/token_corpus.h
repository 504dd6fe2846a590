#pragma once
// A text corpus tokenized for language-model training: the lines are cut
// into blocks and every k-th block is held out for validation, so the
// held-out text is spread over the whole corpus. Windows start at line
// starts and are prefixed with BOS, as prompts are at inference time.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/model/tokenizer/tokenizer.h"

namespace kvscope {

struct TokenStream {
  std::vector<int64_t> ids;          // the lines' tokens, concatenated (newlines included)
  std::vector<int64_t> line_starts;  // offsets in ids where a non-empty line begins
  std::vector<std::string> lines;    // the non-empty lines' text, in order
};

struct TokenCorpus {
  TokenStream train;
  TokenStream valid;
  int64_t bos_id = -1;
};

struct CorpusSplit {
  int64_t block_lines = 100;  // lines per block (shrunk for small corpora)
  int64_t valid_every = 20;   // every valid_every-th block is held out
};

// Throws Error if the corpus has no text or the tokenizer has no BOS.
TokenCorpus tokenizeCorpus(const std::string& text, const Tokenizer& tokenizer, const CorpusSplit& split = {});

// The held-out lines of text, by the same split (for prompts).
std::vector<std::string> heldOutLines(const std::string& text, const CorpusSplit& split = {});

// One training example: input = [BOS, w0 .. w_{T-2}], target = [w0 .. w_{T-1}].
struct Window {
  std::vector<int64_t> input;
  std::vector<int64_t> target;
};

// A window of up to `length` tokens starting at a random line start.
Window randomWindow(const TokenStream& stream, int64_t bos_id, int64_t length, std::mt19937_64& rng);
// `count` windows at evenly spaced line starts (the same every call).
std::vector<Window> fixedWindows(const TokenStream& stream, int64_t bos_id, int64_t length, int64_t count);

}  // namespace kvscope
