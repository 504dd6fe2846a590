#pragma once
// Token text (or any text from a file) made safe to print in a terminal or a
// one-line report: control characters, DEL and invalid UTF-8 bytes become
// \xNN escapes, and bidi controls and line separators \uNNNN escapes, so a
// token cannot move the cursor, colour the terminal, break a line or reorder
// what is printed around it. Printable UTF-8 passes unchanged. Torch-free.
#include <string>

namespace kvscope {

std::string visibleText(const std::string& text);

}  // namespace kvscope
