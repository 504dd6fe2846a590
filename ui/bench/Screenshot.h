#pragma once
// kvscope --screenshot: waits until the first session (or diff) is ready,
// draws every panel and saves the window as a PNG, for docs and for looking
// at the UI under Xvfb the way a user would see it.
#include <QString>
#include <functional>

namespace kvscope::ui {

class MainWindow;

// Waits (running the event loop) for `rounds` rounds or the end of the
// session, then saves the window. `arrange` runs once every panel is drawn,
// just before the grab (e.g. to zoom the KV view). `palette`: saved with 256
// colours (ordered dither), a third of the size, for images kept in docs/.
// False on timeout or a failed write.
bool saveScreenshotWhenReady(MainWindow& window, const QString& path, int rounds, int timeout_ms,
                             const std::function<void()>& arrange = {}, bool palette = false);

}  // namespace kvscope::ui
