#pragma once
// Pieces every kvscope-cli subcommand shares: compute options, prompt and
// sampling options, JSON output.
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/TensorOptions.h>
#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "core/decode/sampling.h"
#include "core/model/model_bundle.h"
#include "core/model/safetensors.h"
#include "core/model/weight_residency.h"

namespace kvscope::cli {

// float32 on CPU: chosen once here and passed down.
c10::TensorOptions computeOptions();

// --weights stored|fp32 (default stored): whether bfloat16 / float16
// checkpoints keep their dtype in memory (core/model/weight_residency.h).
WeightResidency weightResidency(Args& args);

// --prompt TEXT (encoded with the tokenizer's default special tokens) or
// --prompt-ids 1,2,3. Exactly one must be given; a text prompt needs the
// model directory's tokenizer.json.
std::vector<int64_t> promptIds(Args& args, const ModelBundle& model);

// --prompts FILE: one text prompt per line (blank lines skipped), read within
// bounds: at most 16 MB and max_prompts lines (why says what the limit is
// for). A hostile file is refused with its path and the limit it broke.
std::vector<std::string> promptFileLines(const std::string& path, int64_t max_prompts, const std::string& why);

// The prompts of a batch: --prompt TEXT and --prompt-ids 1,2,3, each as often
// as there are sequences (one kind, not both), or --prompts FILE (one text
// prompt per line; empty lines skipped). At least one, at most
// BatchSession::kMaxSequences (core/decode/batch_session.h).
std::vector<std::vector<int64_t>> promptBatch(Args& args, const ModelBundle& model);

// --greedy, or --temperature T [--top-k K] [--top-p P]. Greedy when none given.
SamplingSettings samplingSettings(Args& args);

// --dtype bf16 | f16 | f32: how weights are stored on disk.
StDType storageType(const std::string& name);

// The JSON result: one object on one line, the last line of stdout.
void printJson(const nlohmann::json& result);

// The model directory named by `option`, or the bundled model of `role`
// ("target" or "drafter") when the option is absent.
std::string modelDirectory(Args& args, const std::string& option, const std::string& role);

// Reads a whole file as bytes (no newline added or stripped), refusing one
// larger than max_bytes before it is read (a device such as /dev/zero: once
// max_bytes were read), with an error naming the file, `what` it is for and
// the limit.
constexpr size_t kMaxInputFileBytes = size_t{1} << 30;
std::string readFileBytes(const std::string& path, size_t max_bytes = kMaxInputFileBytes,
                          const std::string& what = "an input file");

}  // namespace kvscope::cli
