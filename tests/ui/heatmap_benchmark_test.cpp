// The KV heatmap redraw after a cursor move stays interactive (median <= 50 ms).
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QTextBrowser>
#include <QtTest>

#include "ui/bench/HeatmapBenchmark.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class HeatmapBenchmarkTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("heatmap_benchmark_test"); }

  void heatmapRedrawIsFast() {
    MainWindowOptions options = fixtureOptions();
    options.initial_rounds = 12;
    MainWindow window(options);
    window.show();
    QVERIFY(waitForRounds(window, 12, kTimeout));
    const HeatmapBenchmarkResult result = benchmarkHeatmapRedraw(window, 3);
    qInfo("%s", qPrintable(result.toJson()));
    QVERIFY(result.samples > 0);
    QVERIFY2(result.median_ms <= 50.0 * kTimeScale, qPrintable(result.toJson()));
  }
};

QTEST_MAIN(HeatmapBenchmarkTest)
#include "heatmap_benchmark_test.moc"
