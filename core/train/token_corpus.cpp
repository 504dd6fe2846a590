#include "core/train/token_corpus.h"

#include <algorithm>

#include "core/error.h"

namespace kvscope {
namespace {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// Which lines are held out: blocks of block_lines, every valid_every-th one.
// Small corpora get smaller blocks so that some text is always held out.
std::vector<bool> heldOutMask(size_t line_count, const CorpusSplit& split) {
  require(split.block_lines > 0 && split.valid_every > 1, "corpus split: bad block size or hold-out interval");
  const int64_t lines = static_cast<int64_t>(line_count);
  const int64_t block = std::max<int64_t>(1, std::min(split.block_lines, lines / (2 * split.valid_every)));
  std::vector<bool> mask(line_count, false);
  bool any = false;
  for (int64_t i = 0; i < lines; ++i) {
    mask[i] = (i / block) % split.valid_every == split.valid_every - 1;
    any = any || mask[i];
  }
  if (!any && lines >= 2) mask[lines - 1] = true;
  return mask;
}

Window windowAt(const TokenStream& stream, int64_t bos_id, int64_t start, int64_t length) {
  Window w;
  const auto first = stream.ids.begin() + start;
  w.target.assign(first, first + length);
  w.input.push_back(bos_id);
  w.input.insert(w.input.end(), first, first + length - 1);
  return w;
}

// Line starts from which a window of `length` fits; falls back to the
// stream's start with a shorter window when the stream is short.
int64_t usableLength(const TokenStream& stream, int64_t length) {
  require(!stream.ids.empty(), "training corpus: a split has no tokens");
  return std::min<int64_t>(length, static_cast<int64_t>(stream.ids.size()));
}

std::vector<int64_t> usableStarts(const TokenStream& stream, int64_t length) {
  std::vector<int64_t> starts;
  for (int64_t s : stream.line_starts) {
    if (s + length <= static_cast<int64_t>(stream.ids.size())) starts.push_back(s);
  }
  if (starts.empty()) starts.push_back(0);
  return starts;
}

}  // namespace

TokenCorpus tokenizeCorpus(const std::string& text, const Tokenizer& tokenizer, const CorpusSplit& split) {
  const auto bos = tokenizer.bosId();
  require(bos.has_value(), "training corpus: the tokenizer has no BOS token");
  const std::vector<std::string> lines = splitLines(text);
  const std::vector<bool> held_out = heldOutMask(lines.size(), split);
  TokenCorpus corpus;
  corpus.bos_id = *bos;
  for (size_t i = 0; i < lines.size(); ++i) {
    TokenStream& stream = held_out[i] ? corpus.valid : corpus.train;
    const auto ids = tokenizer.encode(lines[i] + "\n", /*add_special_tokens=*/false);
    if (!lines[i].empty()) {
      stream.line_starts.push_back(static_cast<int64_t>(stream.ids.size()));
      stream.lines.push_back(lines[i]);
    }
    stream.ids.insert(stream.ids.end(), ids.begin(), ids.end());
  }
  require(!corpus.train.ids.empty(), "training corpus: no text to train on");
  require(!corpus.valid.ids.empty(), "training corpus: too small to hold out a validation split (need 2+ lines)");
  return corpus;
}

std::vector<std::string> heldOutLines(const std::string& text, const CorpusSplit& split) {
  const std::vector<std::string> lines = splitLines(text);
  const std::vector<bool> held_out = heldOutMask(lines.size(), split);
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (held_out[i] && !lines[i].empty()) out.push_back(lines[i]);
  }
  return out;
}

Window randomWindow(const TokenStream& stream, int64_t bos_id, int64_t length, std::mt19937_64& rng) {
  length = usableLength(stream, length);
  const std::vector<int64_t>& all = stream.line_starts;
  // Rejection-sample a line start that leaves room for the window.
  for (int attempt = 0; attempt < 64 && !all.empty(); ++attempt) {
    const int64_t s = all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)];
    if (s + length <= static_cast<int64_t>(stream.ids.size())) return windowAt(stream, bos_id, s, length);
  }
  const auto starts = usableStarts(stream, length);
  return windowAt(stream, bos_id, starts[std::uniform_int_distribution<size_t>(0, starts.size() - 1)(rng)], length);
}

std::vector<Window> fixedWindows(const TokenStream& stream, int64_t bos_id, int64_t length, int64_t count) {
  length = usableLength(stream, length);
  const auto starts = usableStarts(stream, length);
  count = std::max<int64_t>(1, std::min<int64_t>(count, static_cast<int64_t>(starts.size())));
  std::vector<Window> windows;
  for (int64_t i = 0; i < count; ++i) {
    const size_t index = static_cast<size_t>(i * static_cast<int64_t>(starts.size()) / count);
    windows.push_back(windowAt(stream, bos_id, starts[index], length));
  }
  return windows;
}

}  // namespace kvscope
