// kvscope: the desktop debugger. Opens the main window with the bundled
// models (or the given ones) loaded and a sample prompt, ready to step.
#include <QApplication>
#include <QCommandLineParser>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QThread>
#include <QFile>
#include <QFileInfo>
#include <QScreen>
#include <QSettings>
#include <cstdio>
#include <functional>
#include <string>

#include <spdlog/spdlog.h>

#include "core/runtime/allocator_tuning.h"
#include "core/runtime/threads.h"
#include "core/model/weight_residency.h"
#include "core/cache/fault.h"
#include "core/decode/session_options.h"
#include "core/error.h"
#include "ui/bench/HeatmapBenchmark.h"
#include "ui/engine/EngineController.h"
#include "ui/bench/Screenshot.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/logging/LogBridge.h"
#include "ui/widgets/CompressionSettingsForm.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/PresenterZoom.h"
#include "ui/windows/CompressionPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/MainWindow.h"
#include "ui/windows/Workspaces.h"

namespace {

// A whole number option in [low, high]; otherwise prints why and returns false.
bool wholeOption(const QCommandLineParser& parser, const QCommandLineOption& option, int low, int high, int* out) {
  if (!parser.isSet(option)) return true;
  bool ok = false;
  const int value = parser.value(option).toInt(&ok);
  if (!ok || value < low || value > high) {
    std::fprintf(stderr, "kvscope: --%s must be a whole number in [%d, %d], got '%s'\n", qPrintable(option.names().last()), low,
                 high, qPrintable(parser.value(option)));
    return false;
  }
  *out = value;
  return true;
}

// Whether `value` (empty: the option was not given) reads with the core's
// parser (which stores what it read); otherwise prints the core's message
// under the option's name, now rather than in a dialog after the models load.
template <typename Parse>
bool coreAccepts(const char* option, const QString& value, Parse parse) {
  if (value.isEmpty()) return true;
  try {
    parse(value.toStdString());
    return true;
  } catch (const kvscope::Error& error) {
    std::fprintf(stderr, "kvscope: --%s: %s\n", option, error.what());
    return false;
  }
}

// Why a --screenshot or --benchmark-heatmap run has nothing to show: the
// start-up step that failed (its error is in the log just before).
void reportStoppedStartup(const kvscope::ui::MainWindow& window) {
  const kvscope::ui::StartupScript& script = window.startupScript();
  if (!script.stopped()) return;
  std::fprintf(stderr, "kvscope: the start-up stopped at step %zu of %zu: %s\n", script.stepsDone() + 1,
               script.steps().size(), qPrintable(script.steps()[script.stepsDone()].describe()));
}

// kvscope's command line: every option, declared once.
struct CommandLine {
  QCommandLineOption target{{QStringLiteral("t"), QStringLiteral("target")},
      QStringLiteral("Target model directory (Hugging Face layout)."), QStringLiteral("dir")};
  QCommandLineOption drafter{{QStringLiteral("d"), QStringLiteral("drafter")},
      QStringLiteral("Drafter model directory."), QStringLiteral("dir")};
  QCommandLineOption ngram{QStringLiteral("ngram-drafter"), QStringLiteral("Use the n-gram (prompt lookup) drafter.")};
  QCommandLineOption default_layout{QStringLiteral("default-layout"), QStringLiteral("Ignore the saved window layout.")};
  QCommandLineOption rounds{QStringLiteral("rounds"), QStringLiteral("Step this many rounds after loading."),
      QStringLiteral("n")};
  QCommandLineOption select{QStringLiteral("select-round"), QStringLiteral("Then show this round (or 'rejected')."),
      QStringLiteral("round")};
  QCommandLineOption bench{QStringLiteral("benchmark-heatmap"),
      QStringLiteral("Step --rounds rounds (default 40; --max-new default 200), time the KV heatmap "
      "redraw after each cursor move over them, print JSON and exit.")};
  QCommandLineOption position{QStringLiteral("select-position"),
      QStringLiteral("Then select this sequence position (or 'rejected')."),
      QStringLiteral("position")};
  QCommandLineOption fault{QStringLiteral("fault"), QStringLiteral("Inject a cache fault (see kvscope-cli faults)."),
      QStringLiteral("name")};
  QCommandLineOption evict{QStringLiteral("evict"),
      QStringLiteral("Evict in the first session's target cache: POLICY:BUDGET[:every=N][:sinks=N]..., "
      "as kvscope-cli run --evict (e.g. h2o:0.25:every=4)."),
      QStringLiteral("spec")};
  QCommandLineOption speculate{QStringLiteral("self-speculate"),
      QStringLiteral("With --compression: the self-speculation gamma of each slot (0: off; "
      "default 4)."),
      QStringLiteral("gamma")};
  QCommandLineOption layer_head{QStringLiteral("select-layer"),
      QStringLiteral("With --screenshot: put the cursor on the target's layer L (and kv head H) "
      "first."),
      QStringLiteral("L[:H]")};
  QCommandLineOption diff{QStringLiteral("diff"), QStringLiteral("Start with the cached-vs-uncached diff.")};
  QCommandLineOption prompt{QStringLiteral("prompt"), QStringLiteral("The prompt of the first session; given several times, the prompts of a batch decoded together."), QStringLiteral("text")};
  QCommandLineOption max_new{QStringLiteral("max-new"), QStringLiteral("Tokens to generate."), QStringLiteral("n")};
  QCommandLineOption cache_layout{QStringLiteral("cache-layout"),
      QStringLiteral("contiguous (default) or paged[:BLOCK]: K/V in a block pool the batch's sequences share "
      "(the KV Cache panel's Paged pool tab draws it; docs/paged-cache.md)."),
      QStringLiteral("layout")};
  QCommandLineOption batch_layout{QStringLiteral("batch-layout"),
      QStringLiteral("ragged (default) or padded: a batch's prompts left-padded to the longest, every forward as wide "
      "as its widest sequence, pad rows masked (docs/batching.md)."),
      QStringLiteral("layout")};
  QCommandLineOption screenshot{QStringLiteral("screenshot"),
      QStringLiteral("Once the first session (or --diff) is ready and --rounds stepped, save the "
      "window as a PNG and exit (default layout)."),
      QStringLiteral("file")};
  QCommandLineOption prompt_file{QStringLiteral("prompt-file"), QStringLiteral("Read the first session's prompt from a file."),
      QStringLiteral("file")};
  QCommandLineOption kv_rows{QStringLiteral("kv-rows"),
      QStringLiteral("With --screenshot: zoom both KV heatmaps to rows FIRST..LAST first."),
      QStringLiteral("first:last")};
  QCommandLineOption steps_panel{QStringLiteral("attention-steps"),
      QStringLiteral("With --screenshot: bring the Attention Step by Step panel to the front "
      "of its tab group first.")};
  QCommandLineOption kv_pool{QStringLiteral("kv-pool"),
      QStringLiteral("With --screenshot: bring the KV Cache panel's Paged pool tab to the front first "
      "(a --cache-layout paged session's block pool).")};
  QCommandLineOption workspace{QStringLiteral("workspace"),
      QStringLiteral("Start in this workspace: debug, teach, compress or capture (View > "
      "Workspace; a lesson opens in teach, --compression in compress)."),
      QStringLiteral("name")};
  QCommandLineOption lesson{QStringLiteral("lesson"),
      QStringLiteral("Open lesson N (1-based, the Lessons menu's order) instead of a plain session; "
      "with --screenshot, once its page is set up."),
      QStringLiteral("n")};
  QCommandLineOption lesson_page{QStringLiteral("lesson-page"), QStringLiteral("With --lesson: open page N (1-based)."),
      QStringLiteral("n")};
  QCommandLineOption presenter{QStringLiteral("presenter"), QStringLiteral("Presenter mode: zoom the window to 150%.")};
  QCommandLineOption zoom{QStringLiteral("zoom"), QStringLiteral("Zoom the window's fonts and plots (100-200 percent)."),
      QStringLiteral("percent")};
  QCommandLineOption compression{QStringLiteral("compression"),
      QStringLiteral("Open the Compression panel and run slot A (and B) on the first session's "
      "prompt: POLICY:BUDGET or AXIS:SPARSITY, comma-separated, e.g. "
      "h2o:0.25,streaming:0.25 or per-channel:0.7, in the Compress "
      "workspace. With --screenshot: once the panel shows the result."),
      QStringLiteral("a[,b]")};
  QCommandLineOption weights{QStringLiteral("weights"),
      QStringLiteral("stored (default: bf16/f16 checkpoints stay 16-bit in memory) or fp32 "
      "(widened at load)."),
      QStringLiteral("stored|fp32")};
  QCommandLineOption palette{QStringLiteral("screenshot-palette"),
      QStringLiteral("With --screenshot: save 256 colours (ordered dither), about a third of the "
      "size, for images kept in docs/.")};
  QCommandLineParser parser;

  CommandLine() {
    parser.setApplicationDescription(QStringLiteral("KV cache debugger for speculative decoding"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOptions({target, drafter, ngram, default_layout, prompt, prompt_file, max_new, rounds, select, position, fault,
                       diff, bench, screenshot, kv_rows, steps_panel, lesson, lesson_page, presenter, zoom, compression,
                       palette, evict, speculate, layer_head, workspace, weights, cache_layout, batch_layout, kv_pool});
    parser.addPositionalArgument(QStringLiteral("file"),
                                 QStringLiteral("A .kvtrace to replay, or a .kvcapture of any engine to check and show "
                                                "(several: every rank's capture of one tensor-parallel run)."),
                                 QStringLiteral("[file...]"));
  }
};

using kvscope::ui::MainWindowOptions;

// The file argument: a .kvtrace or a .kvcapture that exists; or every
// rank's .kvcapture of one tensor-parallel run.
bool readFileArgument(const CommandLine& cl, MainWindowOptions* options) {
  const QStringList files = cl.parser.positionalArguments();
  if (files.isEmpty()) return true;
  if (files.size() > 1) {
    for (const QString& file : files) {
      if (!QFileInfo(file).isFile() || QFileInfo(file).suffix().toLower() != QStringLiteral("kvcapture")) {
        std::fprintf(stderr, "kvscope: several files are every rank's .kvcapture of one run; %s is not one\n",
                     qPrintable(file));
        return false;
      }
    }
    options->other_ranks = files.mid(1);
  }
  options->open_file = files.front();
  if (!QFileInfo(options->open_file).isFile()) {
    std::fprintf(stderr, "kvscope: %s is not a file\n", qPrintable(options->open_file));
    return false;
  }
  const QString suffix = QFileInfo(options->open_file).suffix().toLower();
  if (suffix != QStringLiteral("kvtrace") && suffix != QStringLiteral("kvcapture")) {
    std::fprintf(stderr, "kvscope: %s: not a .kvtrace or a .kvcapture (the one argument kvscope opens)\n",
                 qPrintable(options->open_file));
    return false;
  }
  return true;
}

// --target, --drafter, --ngram-drafter, --weights.
bool readModelOptions(const CommandLine& cl, kvscope::ModelSpec* models) {
  models->target_dir = cl.parser.value(cl.target).toStdString();
  models->drafter_dir = cl.parser.value(cl.drafter).toStdString();
  if (cl.parser.isSet(cl.ngram)) models->drafter_kind = kvscope::DrafterKind::Ngram;
  if (!cl.parser.isSet(cl.weights)) return true;
  try {
    models->weights = kvscope::parseWeightResidency(cl.parser.value(cl.weights).toStdString(), "--weights");
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvscope: %s\n", e.what());
    return false;
  }
}

// The first session: --prompt / --prompt-file, --max-new, --fault, --evict
// over SessionOptions' defaults (core/decode/session_options.h).
bool readSessionOptions(const CommandLine& cl, kvscope::SessionSpec* session) {
  kvscope::SessionOptions& options = session->options;
  int max_new_tokens = static_cast<int>(options.max_new_tokens);
  if (!wholeOption(cl.parser, cl.max_new, 1, static_cast<int>(kvscope::SessionLimits::kMaxNewTokens), &max_new_tokens)) {
    return false;
  }
  options.max_new_tokens = max_new_tokens;
  const QStringList prompts = cl.parser.values(cl.prompt);
  if (prompts.size() > kvscope::SessionLimits::kMaxBatch) {
    std::fprintf(stderr, "kvscope: --prompt given %d times; a batch decodes at most %lld sequences together\n",
                 static_cast<int>(prompts.size()), static_cast<long long>(kvscope::SessionLimits::kMaxBatch));
    return false;
  }
  session->prompt = prompts.isEmpty() ? std::string() : prompts.front().toStdString();
  for (qsizetype i = 1; i < prompts.size(); ++i) session->more_prompts.push_back(prompts[i].toStdString());
  if (cl.parser.isSet(cl.prompt_file)) {
    QFile file(cl.parser.value(cl.prompt_file));
    if (!file.open(QIODevice::ReadOnly)) {
      std::fprintf(stderr, "kvscope: --prompt-file: cannot read %s\n", qPrintable(cl.parser.value(cl.prompt_file)));
      return false;
    }
    session->prompt = file.readAll().toStdString();
  }
  return coreAccepts("fault", cl.parser.value(cl.fault),
                     [&](const std::string& s) { options.fault = kvscope::parseFault(s); }) &&
         coreAccepts("evict", cl.parser.value(cl.evict),
                     [&](const std::string& s) { options.eviction = kvscope::parseSessionEviction(s); }) &&
         coreAccepts("cache-layout", cl.parser.value(cl.cache_layout),
                     [&](const std::string& s) { options.cache_layout = kvscope::parseStorageLayout(s); }) &&
         coreAccepts("batch-layout", cl.parser.value(cl.batch_layout),
                     [&](const std::string& s) { options.batch_layout = kvscope::parseBatchLayout(s); });
}

// What the start-up does after loading: --rounds, --select-round/-position
// ("rejected": the first round that rejected a draft / its first rejected
// draft), --diff, --lesson/--lesson-page.
bool readStartupSteps(const CommandLine& cl, MainWindowOptions* options) {
  int lesson_number = 0, page_number = 0;
  if (!wholeOption(cl.parser, cl.rounds, 0, 100000, &options->initial_rounds) ||
      !wholeOption(cl.parser, cl.lesson, 1, 1000, &lesson_number) ||
      !wholeOption(cl.parser, cl.lesson_page, 1, 1000, &page_number)) {
    return false;
  }
  const auto selection = [&](const QCommandLineOption& option) -> int64_t {
    if (!cl.parser.isSet(option)) return -1;
    if (cl.parser.value(option) == QStringLiteral("rejected")) return MainWindowOptions::kFirstRejection;
    return cl.parser.value(option).toLongLong();
  };
  options->select_round = selection(cl.select);
  options->select_position = selection(cl.position);
  options->run_diff = cl.parser.isSet(cl.diff);
  if (cl.parser.isSet(cl.lesson)) options->lesson = lesson_number - 1;
  if (cl.parser.isSet(cl.lesson_page)) options->lesson_page = page_number - 1;
  return true;
}

// --compression A[,B] and --self-speculate G: bad words are refused now, with
// the core's message, rather than in a dialog later.
bool readCompressionOptions(const CommandLine& cl, MainWindowOptions* options) {
  if (cl.parser.isSet(cl.speculate)) {
    bool ok = false;
    options->compression_speculate_gamma = cl.parser.value(cl.speculate).toInt(&ok);
    if (!ok || options->compression_speculate_gamma < 0 || options->compression_speculate_gamma > 16) {
      std::fprintf(stderr, "kvscope: --self-speculate must be a gamma in [0, 16], got '%s'\n",
                   qPrintable(cl.parser.value(cl.speculate)));
      return false;
    }
  }
  if (!cl.parser.isSet(cl.compression)) return true;
  options->compression = cl.parser.value(cl.compression).split(QLatin1Char(','), Qt::SkipEmptyParts);
  kvscope::ui::CompressionSettingsForm check(QStringLiteral("check"), true);
  QString error;
  if (options->compression.isEmpty() || options->compression.size() > 2) {
    error = QStringLiteral("give one or two settings, e.g. h2o:0.25,streaming:0.25");
  }
  for (const QString& spec : options->compression) {
    kvscope::CompressionSpec parsed;
    if (error.isEmpty() && check.applyShorthand(spec, &error) && !check.spec(&parsed, &error)) break;
  }
  if (error.isEmpty()) return true;
  std::fprintf(stderr, "kvscope: --compression: %s\n", qPrintable(error));
  return false;
}

// --default-layout, --workspace, --zoom / --presenter.
bool readWindowLook(const CommandLine& cl, MainWindowOptions* options) {
  options->restore_layout = !cl.parser.isSet(cl.default_layout);
  if (cl.parser.isSet(cl.workspace)) {
    kvscope::ui::Workspace parsed;
    if (!kvscope::ui::Workspaces::parse(cl.parser.value(cl.workspace), &parsed)) {
      std::fprintf(stderr, "kvscope: --workspace must be debug, teach, compress or capture, got '%s'\n",
                   qPrintable(cl.parser.value(cl.workspace)));
      return false;
    }
    options->workspace = cl.parser.value(cl.workspace);
  }
  if (!wholeOption(cl.parser, cl.zoom, kvscope::ui::kMinPresenterZoom, kvscope::ui::kMaxPresenterZoom,
                   &options->presenter_zoom)) {
    return false;
  }
  if (cl.parser.isSet(cl.presenter) && !cl.parser.isSet(cl.zoom)) options->presenter_zoom = 150;
  return true;
}

// The window's options from the command line; false (after printing why) for
// a bad option.
bool readWindowOptions(const CommandLine& cl, MainWindowOptions* options) {
  return readFileArgument(cl, options) && readModelOptions(cl, &options->models) &&
         readSessionOptions(cl, &options->session) && readStartupSteps(cl, options) &&
         readCompressionOptions(cl, options) && readWindowLook(cl, options);
}

// --benchmark-heatmap: step the first session, time the KV heatmap's redraws, print JSON.
int runHeatmapBenchmark(const CommandLine& cl, MainWindowOptions options) {
  if (!cl.parser.isSet(cl.rounds)) options.initial_rounds = 40;
  if (!cl.parser.isSet(cl.max_new)) options.session.options.max_new_tokens = 200;  // long enough for ~200 cache rows
  options.restore_layout = false;
  kvscope::ui::MainWindow window(options);
  window.show();
  if (!kvscope::ui::waitForRounds(window, options.initial_rounds, 600000)) {
    reportStoppedStartup(window);
    std::fprintf(stderr, "benchmark: the session did not reach %d rounds\n", options.initial_rounds);
    return 1;
  }
  const auto result = kvscope::ui::benchmarkHeatmapRedraw(window, 5);
  std::printf("%s\n", result.toJson().toUtf8().constData());
  return 0;
}

// --screenshot FILE: once the first session (lesson, compression) is ready,
// save the window and exit.
int runScreenshot(const CommandLine& cl, MainWindowOptions options) {
  options.restore_layout = false;
  kvscope::ui::MainWindow window(options);
  // A job that fails (the file does not open, the models do not load) shows
  // a dialog nobody will close here: its message goes to stderr as well, and
  // the failed start-up step ends the wait below.
  QObject::connect(&window.controller(), &kvscope::ui::EngineController::failed, &window,
                   [](const QString& what, const QString& message) {
                     std::fprintf(stderr, "kvscope: %s failed: %s\n", qPrintable(what), qPrintable(message));
                   });
  if (const QScreen* screen = QGuiApplication::primaryScreen()) window.setGeometry(screen->availableGeometry());
  window.show();
  // --kv-rows FIRST:LAST zooms both KV heatmaps before the grab.
  const QStringList rows = cl.parser.value(cl.kv_rows).split(QLatin1Char(':'));
  const auto zoom = [&] {
    if (rows.size() != 2) return;
    for (auto* view : {window.kvCachePanel()->targetView(), window.kvCachePanel()->drafterView()}) {
      view->setVisibleRows(rows[0].toDouble() - 0.5, rows[1].toDouble() + 0.5);
    }
  };
  const QStringList layer_and_head = cl.parser.value(cl.layer_head).split(QLatin1Char(':'));
  const auto arrange = [&] {
    zoom();
    if (cl.parser.isSet(cl.layer_head)) {
      window.context().setLayerHead(kvscope::CacheRole::Target, layer_and_head.value(0).toLongLong(),
                                    layer_and_head.value(1).toLongLong());
    }
    // --self-speculate: the self-speculation views are what the picture is for.
    if (cl.parser.isSet(cl.compression) && options.compression_speculate_gamma > 0) window.compressionPanel()->scrollToSpeculation();
    if (cl.parser.isSet(cl.steps_panel)) window.dock(kvscope::ui::Panel::AttentionSteps)->raise();
    if (cl.parser.isSet(cl.kv_pool)) {
      window.dock(kvscope::ui::Panel::Kv)->raise();
      window.kvCachePanel()->showPoolTab(true);
    }
  };
  // Runs the event loop while `pending` holds, up to 10 minutes or until a start-up step fails.
  const auto waitWhile = [&window](const std::function<bool()>& pending) {
    QElapsedTimer waited;
    waited.start();
    while (pending() && !window.startupScript().stopped() && waited.elapsed() < 600000) {
      QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
      QThread::msleep(5);
    }
  };
  // The compression lab runs once the first session is ready: wait for its result.
  if (cl.parser.isSet(cl.compression)) waitWhile([&] { return !window.compressionPanel()->lastRun(); });
  // A lesson sets its page up after the models load: wait for it.
  if (options.lesson >= 0) waitWhile([&] { return !window.lessonRunner()->ready(); });
  if (!kvscope::ui::saveScreenshotWhenReady(window, cl.parser.value(cl.screenshot), options.initial_rounds, 600000, arrange,
                                            cl.parser.isSet(cl.palette))) {
    reportStoppedStartup(window);
    std::fprintf(stderr, "screenshot: the session did not get ready or %s could not be written\n",
                 qPrintable(cl.parser.value(cl.screenshot)));
    return 1;
  }
  return 0;
}

// --help, --help-all, -h, -?, --version, -v among the arguments.
bool asksForHelpOrVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "--help-all" || arg == "-h" || arg == "-?" || arg == "--version" || arg == "-v") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication::setOrganizationName(QStringLiteral("kvscope"));
  QCoreApplication::setApplicationName(QStringLiteral("kvscope"));
  QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  // The usage needs no display, but a QApplication aborts without one: read
  // the command line under a QCoreApplication first, which prints the help or
  // the version and exits 0 (an argument that only looked like one, the
  // value of --prompt say, falls through to the window).
  if (asksForHelpOrVersion(argc, argv)) {
    QCoreApplication core(argc, argv);
    CommandLine cl;
    cl.parser.process(core);
  }
  QApplication app(argc, argv);
  kvscope::useMachineThreads();
  kvscope::keepTensorMemoryForReuse();

  CommandLine cl;
  cl.parser.process(app);

  kvscope::ui::LogBridge::install();
  spdlog::info("kvscope {} starting", QApplication::applicationVersion().toStdString());

  kvscope::ui::MainWindowOptions options;
  if (!readWindowOptions(cl, &options)) return 2;
  if (cl.parser.isSet(cl.bench)) return runHeatmapBenchmark(cl, options);
  if (cl.parser.isSet(cl.screenshot)) return runScreenshot(cl, options);
  kvscope::ui::MainWindow window(options);
  window.show();
  return app.exec();
}
