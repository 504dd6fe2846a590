#pragma once
// Text from a file can be any length, and Qt lays out a line of text in one
// piece on the GUI thread: a 2 MB one-line prompt or token text stalled the
// window for seconds. Views show at most a stated number of bytes
// of such text; the full text stays available on demand (a copy action).
#include <QString>

#include <cstddef>
#include <string_view>

namespace kvscope::ui {

// The display limits, in UTF-8 bytes of the original text.
constexpr size_t kTokenShownBytes = 96;      // a token in the strip, a label, an axis or a tooltip
constexpr size_t kNameShownBytes = 512;      // model names, fault names, option summaries
constexpr size_t kPromptShownBytes = 16384;  // the prompt box

// `text` as is when it fits `limit` bytes; otherwise its first ~3/4 and last
// ~1/4 of `limit` bytes (whole UTF-8 characters) around
// " … (N bytes not shown) … ". Only the kept bytes are decoded, so the cost
// does not grow with the text. `elided` (optional) says whether it was cut.
QString elidedForDisplay(std::string_view text, size_t limit, bool* elided = nullptr);

}  // namespace kvscope::ui
