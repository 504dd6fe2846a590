#pragma once
// An error message made fit to show: in a terminal, a log line or a dialog.
// Messages quote what they refuse, and what they refuse comes from files
// (tensor names, JSON values, an engine's name), so a message can be as long
// as the file and can hold terminal escapes or bidi overrides. The front ends
// (the CLI, the GUI) pass every error through this one function. Torch-free.
#include <cstddef>
#include <string>

namespace kvscope {

// Longest message shown, in bytes of the original text: any real error fits
// many times over, and a hostile one no longer floods a terminal or freezes
// a dialog's layout.
constexpr size_t kMaxErrorBytes = 4096;

// `message` cut after `max_bytes` bytes (at a UTF-8 character boundary) with
// "… (N bytes more)", each line then escaped as visibleText does (control
// and bidi characters, invalid UTF-8); line breaks are kept.
std::string displayableError(const std::string& message, size_t max_bytes = kMaxErrorBytes);

}  // namespace kvscope
