#pragma once
// kvscope-cli export-gguf: a Hugging Face checkpoint directory written as a
// GGUF file llama.cpp loads and computes the same logits from. Torch-free.
//
// Families: Llama and Mistral (llama.cpp's "llama", Q/K rows interleaved per
// head for its rotary layout), Qwen2, Qwen3, Gemma 2, Phi-3, GPT-2. Anything
// llama.cpp would compute differently is refused with the reason: another
// model type, a sliding window llama.cpp's architecture ignores, rope
// scalings it does not run, a tokenizer it would split differently.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

enum class GgufExportDType { F32, F16 };

struct GgufExportReport {
  std::string architecture;  // llama.cpp's name: "llama", "qwen2", ...
  std::string tokenizer;     // "gpt2 (pre qwen2)", "llama (sentencepiece-style)"
  int64_t tensors = 0;
  int64_t tokens = 0;
  uint64_t bytes = 0;
  std::vector<std::string> notes;  // what was adapted, e.g. Gemma 2's query scale folded into attn_q
};

// Throws Error naming the problem; nothing is left at `out_path` on failure.
GgufExportReport exportGguf(const std::string& model_dir, const std::string& out_path, GgufExportDType dtype);

}  // namespace kvscope
