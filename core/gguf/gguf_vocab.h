#pragma once
// A Hugging Face tokenizer.json turned into llama.cpp's tokenizer metadata
// (tokenizer.ggml.*), or refused, naming the part llama.cpp would tokenize
// differently. Torch-free.
//
// Two kinds are written:
//   * byte-level BPE ("gpt2" in llama.cpp): vocabulary, merges, token types,
//     and a pre-tokenizer name whose regex is the one tokenizer.json splits
//     with (GPT-2's, Llama 3's, Qwen2's);
//   * sentencepiece-style BPE ("llama", llama.cpp's SPM): pieces with a
//     leading U+2581 for spaces, <0xNN> byte-fallback pieces, and scores that
//     make llama.cpp's score-ordered merging pick the merges tokenizer.json's
//     rank order picks.
#include <cstdint>
#include <string>

#include "core/gguf/gguf_file.h"

namespace kvscope {

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;    // tokenizer.ggml.pre (gpt2 kind only)
  int64_t tokens = 0;  // entries written (the model's vocab_size, padded with unused tokens)
  GgufMetadata metadata;
};

// `vocab_size`: the rows of the model's embedding (>= the tokenizer's tokens;
// llama.cpp needs one token per row). bos/eos: the config's ids, -1 when none.
GgufVocab convertVocab(const std::string& model_dir, int64_t vocab_size, int64_t bos_id, int64_t eos_id);

// Checks the vocabulary a GGUF file carries the way llama.cpp reads it:
// tokenizer.ggml.tokens an array of strings; scores (f32) and token_type
// (i32, llama.cpp's types 0-6) one per token; merges strings "a b"; every
// tokenizer.ggml.*_token_id an integer inside the vocabulary; tokenizer.ggml.model
// a string. A file without tokens must carry none of these. Throws Error
// naming the key. Returns the number of tokens (0 without a vocabulary).
// readGguf runs it on every file.
int64_t checkGgufVocab(const GgufFile& file);

}  // namespace kvscope
