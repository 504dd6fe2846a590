// The plain logic under the zoomable KV heatmap: row bins (no row dropped,
// the largest |x| shown, marks of any row kept) and the viewport (zoom
// around a point, pan, clamp, fit follows a growing cache, a selection
// scrolled into view).
#include <QtTest>

#include "ui/widgets/HeatmapViewport.h"
#include "ui/widgets/RowBins.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

// rows x 2 matrix: row r holds (r, -r), row `spike` holds (-1000, 0.5); all Kept, all Ok.
CacheMatrix ramp(int rows, int spike = -1) {
  CacheMatrix m;
  m.cols = 2;
  for (int r = 0; r < rows; ++r) {
    m.rows.push_back({r, r, RowStatus::Kept, RowState::Ok});
    m.values.push_back(r == spike ? -1000.0f : static_cast<float>(r));
    m.values.push_back(r == spike ? 0.5f : static_cast<float>(-r));
  }
  return m;
}

int covered(const RowBinning& b) {
  int rows = 0;
  for (int i = 0; i < b.bins; ++i) rows += b.binCount(i);
  return rows;
}

}  // namespace

class HeatmapViewportTest : public QObject {
  Q_OBJECT
 private slots:
  void fewRowsGetALineEach() {
    const RowBinning b = binRows(40, -0.5, 39.5, 400);
    QVERIFY(!b.aggregated());
    QCOMPARE(b.bins, 40);
    QCOMPARE(covered(b), 40);
  }

  void manyRowsShareLinesAndNoneIsDropped() {
    for (int rows : {2000, 2001, 2047, 599, 601}) {
      for (int pixels : {100, 333, 500, 600}) {
        const RowBinning b = binRows(rows, -0.5, rows - 0.5, pixels);
        QVERIFY(b.bins <= pixels + 1);
        QCOMPARE(b.first_row, 0);
        QCOMPARE(covered(b), rows);
        for (int r = 0; r < rows; ++r) {
          const int bin = b.binOf(r);
          QVERIFY(bin >= 0 && b.binFirst(bin) <= r && r < b.binEnd(bin));
        }
      }
    }
    QCOMPARE(binRows(2000, -0.5, 1999.5, 500).rows_per_bin, 4);
    QCOMPARE(binRows(600, -0.5, 599.5, 600).rows_per_bin, 1);  // exactly one row per pixel line
  }

  void binsAreAlignedSoPanningDoesNotRegroup() {
    const RowBinning a = binRows(2000, 100.2, 900.2, 200);
    const RowBinning b = binRows(2000, 104.7, 904.7, 200);
    QCOMPARE(a.rows_per_bin, 4);
    QCOMPARE(a.first_row % 4, 0);
    QCOMPARE(b.first_row % 4, 0);
    QVERIFY(a.first_row <= 100 && a.binEnd(a.bins - 1) >= 901);
    // Rows of a window are covered once each.
    QCOMPARE(covered(a), a.binEnd(a.bins - 1) - a.first_row);
  }

  void aLineShowsTheLargestMagnitudeWithItsSign() {
    const CacheMatrix m = ramp(100, 41);
    const RowBinning b = binRows(100, -0.5, 99.5, 10);  // 10 rows per line
    QCOMPARE(b.rows_per_bin, 10);
    const std::vector<float> lines = binValues(m, b);
    QCOMPARE(lines.size(), size_t{20});
    QCOMPARE(lines[4 * 2 + 0], -1000.0f);  // rows 40..49: the spike wins column 0
    QCOMPARE(lines[4 * 2 + 1], -49.0f);    // and row 49 column 1
    QCOMPARE(lines[0 * 2 + 0], 9.0f);
  }

  void aLineCarriesTheMarksOfAnyOfItsRows() {
    CacheMatrix m = ramp(100);
    m.rows[37].state = RowState::Duplicate;
    m.rows[38].state = RowState::Stale;
    m.rows[55].status = RowStatus::Written;
    m.rows[99].status = RowStatus::Pruned;
    const RowBinning b = binRows(100, -0.5, 99.5, 10);
    const std::vector<BinMarks> marks = binMarks(m, b);
    QCOMPARE(marks[3].state, RowState::Stale);  // the worst of the two
    QCOMPARE(marks[3].bad, 2);
    QVERIFY(marks[5].written && !marks[5].pruned && marks[5].state == RowState::Ok);
    QVERIFY(marks[9].pruned);
    QCOMPARE(marks[0].bad, 0);
  }

  void zoomKeepsThePointUnderThePointer() {
    HeatmapViewport v;
    v.setExtent(2000, -3.8, 63.5);
    QVERIFY(v.fitted());
    v.zoomRows(0.5, 500);
    QCOMPARE(v.rows().size(), 1000.0);
    QCOMPARE((500 - v.rows().lower) / v.rows().size(), 500.5 / 2000);
    QVERIFY(!v.fitted());
    for (int i = 0; i < 100; ++i) v.zoomRows(0.5, 500);
    QCOMPARE(v.rows().size(), HeatmapViewport::kMinRows);
    for (int i = 0; i < 100; ++i) v.zoomRows(2, 500);
    QCOMPARE(v.rows().lower, -0.5);
    QCOMPARE(v.rows().upper, 1999.5);
  }

  void panStopsAtTheEnds() {
    HeatmapViewport v;
    v.setExtent(2000, -3.8, 63.5);
    v.setRows(99.5, 199.5);
    v.panRows(-1000);
    QCOMPARE(v.rows().lower, -0.5);
    QCOMPARE(v.rows().size(), 100.0);
    v.panRows(1e9);
    QCOMPARE(v.rows().upper, 1999.5);
  }

  void fittedFollowsGrowthZoomedStays() {
    HeatmapViewport v;
    v.setExtent(100, -3.8, 63.5);
    v.setExtent(120, -3.8, 63.5);
    QCOMPARE(v.rows().upper, 119.5);
    v.setRows(49.5, 59.5);
    v.setExtent(130, -3.8, 63.5);
    QCOMPARE(v.rows().lower, 49.5);
    v.setExtent(20, -3.8, 63.5);  // the cache shrank under the zoom: clamped, size kept
    QCOMPARE(v.rows().upper, 19.5);
    QCOMPARE(v.rows().size(), 10.0);
    v.fit();
    QCOMPARE(v.rows().lower, -0.5);
    QCOMPARE(v.rows().upper, 19.5);
  }

  void showRowScrollsOnlyWhenNeeded() {
    HeatmapViewport v;
    v.setExtent(2000, -3.8, 63.5);
    v.setRows(99.5, 199.5);
    QVERIFY(!v.showRow(150));
    QVERIFY(v.showRow(1500));
    QVERIFY(v.rows().lower < 1499.5 && 1500.5 < v.rows().upper);
    QCOMPARE(v.rows().size(), 100.0);
    QVERIFY(v.showRow(1999));
    QCOMPARE(v.rows().upper, 1999.5);
    QVERIFY(!v.showRow(5000));
  }
};

QTEST_MAIN(HeatmapViewportTest)
#include "heatmap_viewport_test.moc"
