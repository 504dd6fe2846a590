#pragma once
// Post-processors from tokenizer.json ("post_processor"): what encode()
// adds around the text's ids when add_special_tokens is on, e.g. Llama's
// TemplateProcessing "<s> $A". ByteLevel adds nothing (it only adjusts
// offsets, which kvscope does not track).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvscope {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Wraps the ids of a single sequence.
  virtual std::vector<int64_t> process(std::vector<int64_t> ids) const = 0;
  // The special ids placed before the text (Llama's BOS), for bosId().
  virtual std::vector<int64_t> prefixIds() const = 0;
  // Every id process() may add, so the tokenizer can check them against its
  // vocabulary once, at load time (encode must never emit an unknown id).
  virtual std::vector<int64_t> addedIds() const = 0;
};

// nullptr for JSON null. Supported: TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel, Sequence.
std::unique_ptr<PostProcessor> makePostProcessor(const nlohmann::json& node,
                                                 const std::string& context);

}  // namespace kvscope
