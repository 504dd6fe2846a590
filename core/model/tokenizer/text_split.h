#pragma once
// Splitting a piece of text around pattern matches, with Hugging Face's
// SplitDelimiterBehavior: what happens to the matched delimiters.
#include <functional>
#include <string>
#include <vector>

#include "core/model/tokenizer/text_pattern.h"

namespace kvscope {

enum class SplitBehavior {
  Removed,             // drop the matches
  Isolated,            // matches become pieces of their own
  MergedWithPrevious,  // a match joins the piece before it
  MergedWithNext,      // a match joins the piece after it
  Contiguous,          // consecutive matches become one piece
};

// "Removed", "Isolated", ... as tokenizer.json spells them.
SplitBehavior parseSplitBehavior(const std::string& name, const std::string& context);

// A covering of the text by consecutive segments, each a match or not.
struct Segment {
  Span span;
  bool is_match;
};
std::vector<Segment> segmentsFromMatches(size_t text_size, const std::vector<Span>& matches);
// One span per code point that satisfies the predicate (HF's split on a
// char predicate, e.g. Digits or WhitespaceSplit).
std::vector<Span> matchCodePoints(const std::string& text,
                                  const std::function<bool(char32_t)>& predicate);

// Applies the behavior (after optionally inverting which segments are
// matches) and returns the non-empty pieces as spans of the text.
std::vector<Span> splitSpans(size_t text_size, const std::vector<Span>& matches,
                             SplitBehavior behavior, bool invert = false);

}  // namespace kvscope
