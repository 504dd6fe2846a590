#include "core/model/tokenizer/post_processor.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/json_fields.h"
#include "core/model/tokenizer/tokenizer_json.h"

namespace kvscope {
namespace {

// Special ids before and after the sequence; covers TemplateProcessing
// (single sequence), BertProcessing and RobertaProcessing.
class WrapProcessor : public PostProcessor {
 public:
  WrapProcessor(std::vector<int64_t> before, std::vector<int64_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  std::vector<int64_t> process(std::vector<int64_t> ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
    return ids;
  }
  std::vector<int64_t> prefixIds() const override { return before_; }
  std::vector<int64_t> addedIds() const override {
    std::vector<int64_t> ids = before_;
    ids.insert(ids.end(), after_.begin(), after_.end());
    return ids;
  }

 private:
  std::vector<int64_t> before_;
  std::vector<int64_t> after_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  std::vector<int64_t> process(std::vector<int64_t> ids) const override {
    for (const auto& step : steps_) ids = step->process(std::move(ids));
    return ids;
  }
  std::vector<int64_t> prefixIds() const override;
  std::vector<int64_t> addedIds() const override {
    std::vector<int64_t> ids;
    for (const auto& step : steps_) {
      const std::vector<int64_t> more = step->addedIds();
      ids.insert(ids.end(), more.begin(), more.end());
    }
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::vector<int64_t> SequenceProcessor::prefixIds() const {
  std::vector<int64_t> prefix;
  for (const auto& step : steps_) {
    const std::vector<int64_t> more = step->prefixIds();
    prefix.insert(prefix.begin(), more.begin(), more.end());
  }
  return prefix;
}

// The ids of a template's special token name, from its "special_tokens" map.
std::vector<int64_t> specialIds(const nlohmann::json& node, const std::string& name,
                                const std::string& context) {
  const auto& specials = node.at("special_tokens");
  if (!specials.is_object() || !specials.contains(name)) {
    fail(context, "TemplateProcessing uses '" + name + "' but special_tokens does not define it");
  }
  return jsonIntegers(specials.at(name).at("ids"), context,
                      "post_processor.special_tokens['" + name + "'].ids", 0);
}

// Template items are {"SpecialToken": {"id": name}} or {"Sequence": {"id": "A"}}
// objects, or, in hand-written files, a string like "<s> $A".
std::unique_ptr<PostProcessor> makeTemplate(const nlohmann::json& node,
                                            const std::string& context) {
  std::vector<int64_t> before, after;
  bool seen_sequence = false;
  auto addSpecial = [&](const std::string& name) {
    const std::vector<int64_t> ids = specialIds(node, name, context);
    auto& side = seen_sequence ? after : before;
    side.insert(side.end(), ids.begin(), ids.end());
  };
  const auto& single = node.at("single");
  if (single.is_string()) {
    std::istringstream words(single.get<std::string>());
    for (std::string word; words >> word;) {
      if (word[0] == '$') seen_sequence = true;
      else addSpecial(word.substr(0, word.find(':')));
    }
  } else {
    for (const auto& item : single) {
      if (item.contains("Sequence")) seen_sequence = true;
      else addSpecial(jsonString(item.at("SpecialToken").at("id"), context, "post_processor.single: SpecialToken id"));
    }
  }
  return std::make_unique<WrapProcessor>(std::move(before), std::move(after));
}

// Bert/Roberta give cls and sep as [token, id] pairs: [CLS] $A [SEP].
std::unique_ptr<PostProcessor> makeClsSep(const nlohmann::json& node, const std::string& context) {
  return std::make_unique<WrapProcessor>(
      std::vector<int64_t>{jsonInteger(node.at("cls").at(1), context, "post_processor.cls[1]", 0)},
      std::vector<int64_t>{jsonInteger(node.at("sep").at(1), context, "post_processor.sep[1]", 0)});
}

std::unique_ptr<PostProcessor> makeSequence(const nlohmann::json& node,
                                            const std::string& context) {
  std::vector<std::unique_ptr<PostProcessor>> steps;
  for (const auto& child : node.at("processors")) {
    if (auto step = makePostProcessor(child, context)) steps.push_back(std::move(step));
  }
  return std::make_unique<SequenceProcessor>(std::move(steps));
}

}  // namespace

std::unique_ptr<PostProcessor> makePostProcessor(const nlohmann::json& node,
                                                 const std::string& context) {
  if (node.is_null()) return nullptr;
  const std::string type = componentType(node, context, "post-processor");
  if (type == "TemplateProcessing") return makeTemplate(node, context);
  if (type == "BertProcessing" || type == "RobertaProcessing") return makeClsSep(node, context);
  if (type == "ByteLevel") return std::make_unique<WrapProcessor>(std::vector<int64_t>{},
                                                                  std::vector<int64_t>{});
  if (type == "Sequence") return makeSequence(node, context);
  fail(context, "unsupported post-processor type '" + type + "'");
}

}  // namespace kvscope
