#pragma once
// A quick look at a file before anything is asked or replaced: is it a
// .kvtrace or a .kvcapture kvscope can open? Both are safetensors files whose
// __metadata__ names what they are ("kvscope" for a trace, "kvscope_capture"
// for a capture). Reads the header only (bounded), on the GUI thread, so a
// wrong, truncated or foreign file is refused before "Save the trace
// first?" is asked; the full validation still happens when the file opens.
#include <QString>

namespace kvscope::ui {

enum class OpenableKind { Trace, Capture };

// Empty when `path` looks like a file of `kind`; else the problem, naming the file.
QString openableProblem(const QString& path, OpenableKind kind);

}  // namespace kvscope::ui
