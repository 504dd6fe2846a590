#pragma once
// A run of llama.cpp recorded by interop/llamacpp/recorder.mjs (or by a C/C++
// program that writes the same log, docs/llamacpp.md) turned into a
// .kvcapture (docs/capture-format.md) that `kvscope-cli check` reads.
// Torch-free.
//
// The log (JSON, format "kvscope-llamacpp-log", version 1) names each role's
// GGUF and checkpoint directory and lists, in run order, every evaluate (a
// llama_decode: its tokens, the positions it used, the sequence state after
// it, optionally the log-probabilities of its outputs) and every erase (a
// llama_memory_seq_rm: its ranges and the state after it).
//
// llama.cpp's cells are presented as the format's "append" layers: the rows
// a call kept, in the order the previous state held them, then the rows it
// wrote, by position. A row is identified by its bits (K and V of the cell);
// keys are stored after the rotary embedding, llama.cpp's per-head pair
// interleave of Llama-style models undone so they compare with the
// checkpoint's reference forward.
#include <cstdint>
#include <string>

namespace kvscope {

struct LlamaCaptureReport {
  int64_t target_calls = 0;
  int64_t drafter_calls = 0;
  int64_t erases = 0;
  std::string cache_type;  // "F32", "F16", "BF16"
};

// Throws Error naming the log entry, state file or model that is refused
// (a sliding-window iSWA model, a quantized cache, a state that does not
// match the model's shape, ...). The capture is written atomically.
LlamaCaptureReport importLlamaCapture(const std::string& log_path, const std::string& out_path);

}  // namespace kvscope
