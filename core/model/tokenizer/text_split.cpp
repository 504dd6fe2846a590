#include "core/model/tokenizer/text_split.h"

#include "core/error.h"
#include "core/model/tokenizer/unicode_text.h"

namespace kvscope {
namespace {

std::vector<Span> mergeWithPrevious(const std::vector<Segment>& segments) {
  std::vector<Span> out;
  bool previous_match = false;
  for (const Segment& s : segments) {
    if (s.is_match && !previous_match && !out.empty()) {
      out.back().end = s.span.end;
    } else {
      out.push_back(s.span);
    }
    previous_match = s.is_match;
  }
  return out;
}

// Mirror image of mergeWithPrevious: walk backwards, extend the next piece.
std::vector<Span> mergeWithNext(const std::vector<Segment>& segments) {
  std::vector<Span> reversed;
  bool previous_match = false;
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    if (it->is_match && !previous_match && !reversed.empty()) {
      reversed.back().begin = it->span.begin;
    } else {
      reversed.push_back(it->span);
    }
    previous_match = it->is_match;
  }
  return {reversed.rbegin(), reversed.rend()};
}

std::vector<Span> contiguous(const std::vector<Segment>& segments) {
  std::vector<Span> out;
  bool previous_match = false;
  for (const Segment& s : segments) {
    if (s.is_match == previous_match && !out.empty()) {
      out.back().end = s.span.end;
    } else {
      out.push_back(s.span);
    }
    previous_match = s.is_match;
  }
  return out;
}

std::vector<Span> applyBehavior(const std::vector<Segment>& segments, SplitBehavior behavior) {
  std::vector<Span> spans;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Segment& s : segments) spans.push_back(s.span);
      return spans;
    case SplitBehavior::Removed:
      for (const Segment& s : segments) {
        if (!s.is_match) spans.push_back(s.span);
      }
      return spans;
    case SplitBehavior::MergedWithPrevious: return mergeWithPrevious(segments);
    case SplitBehavior::MergedWithNext: return mergeWithNext(segments);
    case SplitBehavior::Contiguous: return contiguous(segments);
  }
  return spans;
}

}  // namespace

SplitBehavior parseSplitBehavior(const std::string& name, const std::string& context) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail(context, "unknown split behavior '" + name + "'");
}

std::vector<Segment> segmentsFromMatches(size_t text_size, const std::vector<Span>& matches) {
  std::vector<Segment> segments;
  size_t previous = 0;
  for (const Span& m : matches) {
    if (m.begin != previous) segments.push_back({{previous, m.begin}, false});
    segments.push_back({m, true});
    previous = m.end;
  }
  if (previous != text_size) segments.push_back({{previous, text_size}, false});
  return segments;
}

std::vector<Span> matchCodePoints(const std::string& text,
                                  const std::function<bool(char32_t)>& predicate) {
  std::vector<Span> spans;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8Step(text, pos);
    if (predicate(step.code_point)) spans.push_back({pos, pos + step.length});
    pos += step.length;
  }
  return spans;
}

std::vector<Span> splitSpans(size_t text_size, const std::vector<Span>& matches,
                             SplitBehavior behavior, bool invert) {
  std::vector<Segment> segments = segmentsFromMatches(text_size, matches);
  if (invert) {
    for (Segment& s : segments) s.is_match = !s.is_match;
  }
  std::vector<Span> pieces;
  for (const Span& span : applyBehavior(segments, behavior)) {
    if (span.end > span.begin) pieces.push_back(span);
  }
  return pieces;
}

}  // namespace kvscope
