#include "core/decode/session_options.h"

#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"

namespace kvscope {

namespace {

using nlohmann::json;

// The keys a session's options have: the ones sessionOptionsJson writes.
const json& knownKeys() {
  static const json known = sessionOptionsJson(SessionOptions{});
  return known;
}

std::string keyList() {
  std::string list;
  for (const auto& [key, value] : knownKeys().items()) list += (list.empty() ? "" : ", ") + key;
  return list;
}

[[noreturn]] void badField(const std::string& key, const std::string& wanted, const json& value) {
  std::string shown = value.dump();
  if (shown.size() > 80) shown = shown.substr(0, 80) + "...";
  throw SessionOptionError(key, "must be " + wanted + ", got " + shown);
}

// Reads object[key] into *out when present, through the reader for its type.
class FieldReader {
 public:
  explicit FieldReader(const json& object) : object_(object) {}

  void integer(const char* key, int64_t min, int64_t max, int64_t* out) const {
    const json* value = find(key);
    if (!value) return;
    const std::string wanted = "an integer in " + std::to_string(min) + ".." + std::to_string(max);
    if (!value->is_number_integer()) badField(key, wanted, *value);
    if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(max)) badField(key, wanted, *value);
    const int64_t number = value->get<int64_t>();
    if (number < min || number > max) badField(key, wanted, *value);
    *out = number;
  }

  void number(const char* key, double* out) const {
    const json* value = find(key);
    if (!value) return;
    if (!value->is_number()) badField(key, "a number", *value);
    *out = value->get<double>();
  }

  void probability(const char* key, double* out) const {
    const json* value = find(key);
    if (!value) return;
    if (!value->is_number() || !(value->get<double>() >= 0.0 && value->get<double>() <= 1.0)) {
      badField(key, "a probability in 0..1", *value);
    }
    *out = value->get<double>();
  }

  void boolean(const char* key, bool* out) const {
    const json* value = find(key);
    if (!value) return;
    if (!value->is_boolean()) badField(key, "true or false", *value);
    *out = value->get<bool>();
  }

  // The text of a string field; nullopt when absent. Names and --evict
  // forms are short: a longer text is refused before anything quotes it.
  std::optional<std::string> text(const char* key) const {
    constexpr size_t kMaxBytes = 256;
    const json* value = find(key);
    if (!value) return std::nullopt;
    if (!value->is_string() || value->get_ref<const std::string&>().size() > kMaxBytes) {
      badField(key, "a string of at most " + std::to_string(kMaxBytes) + " bytes", *value);
    }
    return value->get<std::string>();
  }

 private:
  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  const json& object_;
};

// "greedy", "sample", or the description of the numbers read beside it (what
// sessionOptionsJson writes for sampled settings).
void readSampling(const FieldReader& fields, SamplingSettings* sampling) {
  fields.number("temperature", &sampling->temperature);
  fields.integer("top_k", 0, SessionLimits::kMaxTopK, &sampling->top_k);
  fields.number("top_p", &sampling->top_p);
  const auto text = fields.text("sampling");
  if (!text) return;
  sampling->greedy = *text == "greedy";
  if (sampling->greedy || *text == "sample") return;
  if (sampling->describe() != *text) {
    throw SessionOptionError("sampling", "must be \"greedy\" or \"sample\", got '" + *text + "'");
  }
}

// A field's own message first, so that a lesson names the field.
template <typename Parse>
auto parsedField(const char* key, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const Error& e) {
    throw SessionOptionError(key, e.what());
  }
}

}  // namespace

const char* batchLayoutName(BatchLayout layout) { return layout == BatchLayout::Padded ? "padded" : "ragged"; }

BatchLayout parseBatchLayout(const std::string& text) {
  if (text == "ragged") return BatchLayout::Ragged;
  if (text == "padded") return BatchLayout::Padded;
  throw Error("unknown batch layout '" + text + "' (known: ragged, padded)");
}

void SessionOptions::validate() const {
  require(gamma >= 0 && gamma <= SessionLimits::kMaxGamma,
          "gamma must be in 0.." + std::to_string(SessionLimits::kMaxGamma) + ", got " + std::to_string(gamma));
  require(gamma_min >= 1 && gamma_max >= gamma_min && gamma_max <= SessionLimits::kMaxGamma,
          "adaptive gamma bounds must satisfy 1 <= min <= max <= " + std::to_string(SessionLimits::kMaxGamma));
  require(!adaptive_gamma || (gamma >= gamma_min && gamma <= gamma_max),
          "the starting gamma must lie within the adaptive bounds");
  require(draft_confidence >= 0.0 && draft_confidence <= 1.0,  // NaN fails both
          "the draft confidence must be a probability in 0..1 (0: off), got " + std::to_string(draft_confidence));
  require(max_new_tokens >= 1 && max_new_tokens <= SessionLimits::kMaxNewTokens,
          "max new tokens must be in 1.." + std::to_string(SessionLimits::kMaxNewTokens) + ", got " +
              std::to_string(max_new_tokens));
  require(trace_budget_mb >= 0 && trace_budget_mb <= SessionLimits::kMaxTraceBudgetMb,
          "the trace budget must be 0 (no limit) or a positive number of MB, got " + std::to_string(trace_budget_mb));
  sampling.validate();
  if (eviction) {
    require(use_cache, "--evict needs the KV cache on (--cache on): it removes rows from the target's cache");
    eviction->validate();
  }
  if (cache_layout.paged) {
    require(use_cache, "--cache-layout paged needs the KV cache on (--cache on)");
    require(!eviction, "--evict works on the contiguous cache layout only: the paged layout keeps no eviction masks yet");
  }
  if (batch_layout == BatchLayout::Padded) {
    require(use_cache, "--batch-layout padded needs the KV cache on (--cache on): its pad rows live in the caches");
    require(!cache_layout.paged,
            "--batch-layout padded with --cache-layout paged: paged engines do not pad (each sequence's block table "
            "holds its own rows, so a ragged batch is what they run); use one or the other");
    require(!eviction, "--batch-layout padded with --evict: an eviction policy's scores and masks would count the pad "
                       "rows as text; the padded layout does not evict yet");
    require(!breaksPaddedWrites(fault),
            std::string("--batch-layout padded with fault ") + faultInfo(fault).name +
                ": the fault changes which of a forward's rows are written or what its new rows see, and a padded "
                "forward's pads are among those rows; run it in the ragged layout");
  }
  if (needsPaddedBatch(fault)) {
    require(batch_layout == BatchLayout::Padded,
            std::string("fault ") + faultInfo(fault).name +
                " acts on a padded batch's pad rows; run with --batch-layout padded and two or more prompts of "
                "different lengths");
  }
}

nlohmann::json sessionOptionsJson(const SessionOptions& o) {
  return {{"gamma", o.gamma},
          {"adaptive_gamma", o.adaptive_gamma},
          {"gamma_min", o.gamma_min},
          {"gamma_max", o.gamma_max},
          {"draft_confidence", o.draft_confidence},
          {"max_new_tokens", o.max_new_tokens},
          {"use_cache", o.use_cache},
          {"sampling", o.sampling.describe()},
          {"temperature", o.sampling.temperature},
          {"top_k", o.sampling.top_k},
          {"top_p", o.sampling.top_p},
          {"seed", o.seed},
          {"bookkeeping", bookkeepingName(o.bookkeeping)},
          {"ignore_eos", o.ignore_eos},
          {"record_attention", o.record_attention},
          {"record_logits", o.record_logits},
          {"trace_budget_mb", o.trace_budget_mb},
          {"fault", faultInfo(o.fault).name},
          {"eviction", o.eviction ? o.eviction->describe() : "none"},
          {"cache_layout", storageLayoutName(o.cache_layout)},
          {"batch_layout", batchLayoutName(o.batch_layout)}};
}

SessionOptions readSessionOptions(const nlohmann::json& object, SessionOptions o) {
  if (!object.is_object()) {
    throw SessionOptionError("", "the session options must be a JSON object, got " + std::string(object.type_name()));
  }
  for (const auto& [key, value] : object.items()) {
    if (!knownKeys().contains(key)) throw SessionOptionError(key, "unknown session option (known: " + keyList() + ")");
  }
  const FieldReader fields(object);
  fields.integer("gamma", 0, SessionLimits::kMaxGamma, &o.gamma);
  fields.boolean("adaptive_gamma", &o.adaptive_gamma);
  fields.integer("gamma_min", 1, SessionLimits::kMaxGamma, &o.gamma_min);
  fields.integer("gamma_max", 1, SessionLimits::kMaxGamma, &o.gamma_max);
  fields.probability("draft_confidence", &o.draft_confidence);
  fields.integer("max_new_tokens", 1, SessionLimits::kMaxNewTokens, &o.max_new_tokens);
  fields.boolean("use_cache", &o.use_cache);
  readSampling(fields, &o.sampling);
  int64_t seed = static_cast<int64_t>(o.seed);
  fields.integer("seed", 0, SessionLimits::kMaxSeed, &seed);
  o.seed = static_cast<uint64_t>(seed);
  if (const auto text = fields.text("bookkeeping")) o.bookkeeping = parsedField("bookkeeping", *text, parseBookkeeping);
  fields.boolean("ignore_eos", &o.ignore_eos);
  fields.boolean("record_attention", &o.record_attention);
  fields.boolean("record_logits", &o.record_logits);
  fields.integer("trace_budget_mb", 0, SessionLimits::kMaxTraceBudgetMb, &o.trace_budget_mb);
  if (const auto text = fields.text("fault")) o.fault = parsedField("fault", *text, parseFault);
  if (const auto text = fields.text("eviction")) {
    o.eviction.reset();
    if (*text != "none") o.eviction = parsedField("eviction", *text, parseSessionEviction);
  }
  if (const auto text = fields.text("cache_layout")) o.cache_layout = parsedField("cache_layout", *text, parseStorageLayout);
  if (const auto text = fields.text("batch_layout")) o.batch_layout = parsedField("batch_layout", *text, parseBatchLayout);
  try {
    o.validate();
  } catch (const Error& e) {
    throw SessionOptionError("", e.what());
  }
  return o;
}

}  // namespace kvscope
