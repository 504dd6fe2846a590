// A SAX handler that builds the nlohmann DOM itself, so every limit is
// checked on the event that would exceed it: nothing deeper, larger or more
// numerous than the limit is ever allocated.
#include "core/model/json_limits.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <vector>

#include "core/error.h"

namespace kvscope {

// Real files sit far below these: safetensors headers nest 3 levels with ~8
// values per tensor (kvscope reads at most 200,000 tensors); tokenizer.json
// nests about 8 (Gemma-3's, the largest common one, is 33 MB with about 2M
// values); a kvscope trace nests about 8 with ~12 values per ledger entry.
// A parsed value costs 16-100 bytes, so max_values bounds the memory of a
// document (a safetensors header is streamed: only one member is held).
const JsonLimits kSafetensorsHeaderLimits{"safetensors header", 100000000, 16, 4000000, false, true};
// Model files refuse repeated keys: nlohmann keeps the last one, so a config
// that says both 2 and 24 layers, a vocabulary that gives a token two ids or
// a shard index that maps a tensor to two files would load silently as
// whichever came last (and Python's json and serde disagree on which wins).
const JsonLimits kConfigJsonLimits{"config.json", size_t{16} << 20, 32, 1000000, true, true};
const JsonLimits kTokenizerJsonLimits{"tokenizer.json", size_t{128} << 20, 64, 4000000, true, true};
const JsonLimits kTokenizerConfigLimits{"tokenizer_config.json", size_t{16} << 20, 64, 1000000, true, true};
const JsonLimits kShardIndexLimits{"safetensors index", size_t{64} << 20, 8, 4000000, true, true};
const JsonLimits kTraceMetadataLimits{"trace metadata", 100000000, 64, 8000000, true, false};

namespace {

using json = nlohmann::json;

constexpr size_t kPathHead = 4;  // path components shown before "..."
constexpr size_t kPathTail = 3;  // and after
constexpr size_t kMaxKeyShown = 40;

// Strips nlohmann's "[json.exception.parse_error.101] " prefix.
std::string withoutExceptionId(const std::string& text) {
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find("] ");
    if (close != std::string::npos) return text.substr(close + 2);
  }
  return text;
}

class LimitedBuilder : public nlohmann::json_sax<json> {
 public:
  LimitedBuilder(const std::string& context, const JsonLimits& limits, const JsonMemberSink& sink)
      : context_(context), limits_(limits), sink_(sink) {}

  json take() { return std::move(root_); }

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool value) override { return scalar(json(value)); }
  bool number_integer(number_integer_t value) override { return scalar(json(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    if (limits_.int64_numbers && value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      failNumber(std::to_string(value));
    return scalar(json(value));
  }
  bool number_float(number_float_t value, const string_t& text) override {
    // 2^63 itself does not fit either; -2^63 does, but no field needs it.
    if (limits_.int64_numbers && !(std::fabs(value) < 9223372036854775808.0)) failNumber(text);
    return scalar(json(value));
  }
  bool string(string_t& value) override { return scalar(json(std::move(value))); }
  bool binary(binary_t& value) override { return scalar(json::binary(std::move(value))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    Frame& frame = frames_.back();
    if (limits_.unique_keys && !streamingMember() && frame.container->contains(key))
      fail("duplicate key '" + shortKey(key) + "' in the object at " + path(frames_.size() - 1) +
           " (JSON readers disagree on which value wins)");
    frame.key = std::move(key);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail(std::string("malformed JSON: ") + limits_.kind + " is not JSON (" + withoutExceptionId(e.what()) + ")");
  }

 private:
  struct Frame {
    json* container;
    std::string key;   // objects: the member being read
    size_t index = 0;  // arrays: the element being read
  };

  [[noreturn]] void fail(const std::string& problem) const { kvscope::fail(context_, problem); }

  [[noreturn]] void failNumber(const std::string& text) const {
    fail("number " + text + " at " + path() + " is outside the range of a 64-bit integer (|x| < 2^63)," +
         " the limit for numbers in a " + limits_.kind);
  }

  static std::string shortKey(const std::string& key) {
    return key.size() <= kMaxKeyShown ? key : key.substr(0, kMaxKeyShown) + "...";
  }

  // "/model/vocab/abc": where the value being read sits (first and last
  // components only, when it is deep). `depth` components: fewer names the
  // enclosing container (a key being read has no value yet).
  std::string path(size_t depth = SIZE_MAX) const {
    std::vector<std::string> parts;
    for (size_t i = 0; i < std::min(depth, frames_.size()); ++i) {
      const Frame& f = frames_[i];
      parts.push_back(f.container->is_array() ? std::to_string(f.index) : shortKey(f.key));
    }
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts.size() > kPathHead + kPathTail && i == kPathHead) {
        out += "/...";
        i = parts.size() - kPathTail;
      }
      out += "/" + parts[i];
    }
    return out.empty() ? "/" : out;
  }

  // The top-level object's members go to the sink when there is one.
  bool streamingMember() const { return sink_ && frames_.size() == 1 && frames_[0].container == &root_; }

  // Places a new value where the parser stands and returns it.
  json* place(json&& value) {
    if (++values_ > limits_.max_values)
      fail("more than " + std::to_string(limits_.max_values) + " JSON values (at " + path() +
           "), the limit for a " + limits_.kind);
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      frame.container->push_back(std::move(value));
      return &frame.container->back();
    }
    if (streamingMember()) {
      member_ = std::move(value);
      return &member_;
    }
    json& slot = (*frame.container)[frame.key];
    slot = std::move(value);
    return &slot;
  }

  // A value is complete: advance the array index or hand a member over.
  void completed() {
    if (frames_.empty()) return;
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      ++frame.index;
    } else if (streamingMember()) {
      sink_(std::move(frame.key), std::move(member_));
      member_ = json();
    }
  }

  bool scalar(json&& value) {
    place(std::move(value));
    completed();
    return true;
  }

  bool open(json&& container) {
    if (frames_.size() + 1 > limits_.max_depth)
      fail("JSON nested deeper than " + std::to_string(limits_.max_depth) + " levels at " + path() +
           ", the limit for a " + limits_.kind);
    json* slot = place(std::move(container));
    frames_.push_back({slot, {}, 0});
    return true;
  }

  bool close() {
    frames_.pop_back();
    completed();
    return true;
  }

  const std::string& context_;
  const JsonLimits& limits_;
  const JsonMemberSink& sink_;
  json root_;
  json member_;  // the top-level member being streamed
  std::vector<Frame> frames_;
  size_t values_ = 0;
};

// nlohmann reads a NUL byte as the end of the input; allow NUL padding at
// the end, but nothing after it.
std::string_view beforePadding(std::string_view text, const std::string& context, const JsonLimits& limits) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return text;
  for (size_t i = nul; i < text.size(); ++i)
    if (text[i] != '\0' && text[i] != ' ')
      fail(context, std::string("malformed JSON: ") + limits.kind + " is not JSON (NUL byte at offset " + std::to_string(nul) +
                        " inside the text)");
  return text.substr(0, nul);
}

}  // namespace

json parseJsonWithLimits(std::string_view text, const std::string& context, const JsonLimits& limits,
                         const JsonMemberSink& sink) {
  if (text.size() > limits.max_bytes)
    fail(context, std::string(limits.kind) + " of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                      std::to_string(limits.max_bytes) + " bytes");
  text = beforePadding(text, context, limits);
  LimitedBuilder builder(context, limits, sink);
  json::sax_parse(text.begin(), text.end(), &builder);
  return builder.take();
}

json readJsonFileWithLimits(const std::string& path, const JsonLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot open file");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes)
    fail(path, std::string(limits.kind) + " of " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.gcount() != static_cast<std::streamsize>(text.size())) fail(path, "cannot read file");
  return parseJsonWithLimits(text, path, limits);
}

}  // namespace kvscope
