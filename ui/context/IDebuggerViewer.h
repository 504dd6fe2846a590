#pragma once
// What every panel implements: it registers with the DebuggerContext in its
// constructor and is told when the session or the cursor changes.
namespace kvscope::ui {

class IDebuggerViewer {
 public:
  virtual ~IDebuggerViewer() = default;
  // A new snapshot arrived (after a step, a load or a new session), or the
  // session was closed (snapshot is then null).
  virtual void onSessionChanged() = 0;
  virtual void onCursorChanged() = 0;
};

}  // namespace kvscope::ui
