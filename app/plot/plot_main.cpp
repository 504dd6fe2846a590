// kvscope-plot: draws the charts of a `kvscope-cli bench` report offscreen
// with QCustomPlot. A separate program so that kvscope-cli stays free of Qt
// (it runs on headless machines without Qt's libraries); `kvscope-cli bench
// --plot DIR` writes DIR/bench.json and runs this on it.
//   kvscope-plot BENCH.json OUT_DIR   ->  OUT_DIR/decode_by_context.png, speculative.png, throughput.png
#include <QApplication>
#include <QDir>
#include <QSharedPointer>

#include <cmath>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <qcustomplot.h>

namespace {

using Json = nlohmann::json;

void style(QCustomPlot& plot, const QString& title, const QString& x, const QString& y) {
  plot.plotLayout()->insertRow(0);
  plot.plotLayout()->addElement(0, 0, new QCPTextElement(&plot, title, QFont("sans", 11, QFont::Bold)));
  plot.xAxis->setLabel(x);
  plot.yAxis->setLabel(y);
  plot.legend->setVisible(true);
}

QCPGraph* line(QCustomPlot& plot, const QString& name, const QColor& colour, const QVector<double>& xs,
               const QVector<double>& ys) {
  QCPGraph* g = plot.addGraph();
  g->setName(name);
  g->setPen(QPen(colour, 2));
  g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
  g->setData(xs, ys);
  return g;
}

// Per-token decode time against the context, cache on and off, with the
// bandwidth bound (one bare matrix-vector pass over the fp32 weights).
void decodeByContext(const Json& r, const QString& path) {
  QCustomPlot plot;
  style(plot, "One decode step by context", "context (tokens)", "ms per token (median)");
  QVector<double> x_on, on, x_off, off;
  for (const Json& e : r["decode_by_context"]) {
    if (e.contains("skipped")) continue;
    x_on << e["context"].get<double>();
    on << e["cache_on"]["median_ms"].get<double>();
    if (!e["cache_off"].is_null()) {
      x_off << e["context"].get<double>();
      off << e["cache_off"]["median_ms"].get<double>();
    }
  }
  line(plot, "cache on", QColor(0, 114, 178), x_on, on);
  line(plot, "cache off", QColor(213, 94, 0), x_off, off);
  const double bound = r["forward_vs_baseline"]["bare_matvec_pass"]["median_ms"].get<double>();
  if (!x_on.isEmpty()) {
    QCPGraph* b = line(plot, "bare mv pass over the weights", Qt::gray, {x_on.front(), x_on.back()}, {bound, bound});
    b->setPen(QPen(Qt::gray, 1.5, Qt::DashLine));
    b->setScatterStyle(QCPScatterStyle::ssNone);
  }
  plot.xAxis->setScaleType(QCPAxis::stLogarithmic);
  plot.xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  plot.yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot.yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  plot.rescaleAxes();
  plot.xAxis->scaleRange(1.2, plot.xAxis->range().center());
  plot.yAxis->scaleRange(1.5, plot.yAxis->range().center());
  plot.savePng(path, 800, 500);
}

// Measured speedup (median, min-max bars) and the theoretical one per gamma.
void speculative(const Json& r, const QString& path) {
  QCustomPlot plot;
  style(plot, "Speculative decoding: measured vs theoretical speedup", "gamma", "speedup over autoregressive");
  QVector<double> gammas, measured, low, high, theory, priced, alpha;
  for (const Json& g : r["speculative"]) {
    gammas << g["gamma"].get<double>();
    const Json& m = g["measured_speedup"];
    measured << m["median"].get<double>();
    low << m["median"].get<double>() - m["min"].get<double>();
    high << m["max"].get<double>() - m["median"].get<double>();
    // null when a confidence stop cut rounds short: the formula assumes gamma drafts
    if (g["theoretical_speedup"].is_number()) theory << g["theoretical_speedup"].get<double>();
    if (g["verify_priced_speedup"].is_number()) priced << g["verify_priced_speedup"].get<double>();
    alpha << g["alpha"].get<double>();
  }
  QCPGraph* m = line(plot, "measured (median, min-max)", QColor(0, 114, 178), gammas, measured);
  auto* bars = new QCPErrorBars(plot.xAxis, plot.yAxis);
  bars->setDataPlottable(m);
  bars->setData(low, high);
  bars->removeFromLegend();
  if (theory.size() == gammas.size()) {
    line(plot, "theoretical (1-a^(g+1))/((1-a)(gc+1))", QColor(0, 158, 115), gammas, theory);
    line(plot, "verify at its measured cost v: (1-a^(g+1))/((1-a)(gc+v))", QColor(230, 159, 0), gammas, priced);
  }
  QCPGraph* a = line(plot, "alpha (right axis)", QColor(204, 121, 167), gammas, alpha);
  a->setValueAxis(plot.yAxis2);
  plot.yAxis2->setVisible(true);
  plot.yAxis2->setLabel("alpha");
  plot.yAxis2->setRange(0, 1.05);
  plot.xAxis->setRange(0.5, gammas.isEmpty() ? 8.5 : gammas.back() + 0.5);
  const QVector<double>& tallest = theory.size() == gammas.size() ? theory : measured;
  plot.yAxis->setRange(0, std::max(1.0, tallest.isEmpty() ? 1.0 : *std::max_element(tallest.begin(), tallest.end())) * 1.25);
  // Speedups sit near 1-2 and alpha near the top: the bottom is free.
  plot.axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  plot.savePng(path, 800, 500);
}

// Tokens per second: autoregressive with the cache on and off.
void throughput(const Json& r, const QString& path) {
  QCustomPlot plot;
  style(plot, "Autoregressive decoding", "", "tokens / s (median)");
  plot.legend->setVisible(false);
  const Json& a = r["autoregressive"];
  auto* bars = new QCPBars(plot.xAxis, plot.yAxis);
  bars->setData({1, 2}, {a["cache_on"]["tokens_per_second"].get<double>(), a["cache_off"]["tokens_per_second"].get<double>()});
  bars->setBrush(QColor(0, 114, 178, 160));
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  ticker->addTick(1, "cache on");
  ticker->addTick(2, "cache off");
  plot.xAxis->setTicker(ticker);
  plot.xAxis->setRange(0.3, 2.7);
  plot.rescaleAxes(true);
  plot.yAxis->setRangeLower(0);
  plot.yAxis->setRangeUpper(a["cache_on"]["tokens_per_second"].get<double>() * 1.15);
  plot.savePng(path, 500, 400);
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  if (argc != 3) {
    std::cerr << "usage: kvscope-plot BENCH.json OUT_DIR\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string(argv[1]) + ": cannot open");
    const Json report = Json::parse(in);
    const QDir out(QString::fromLocal8Bit(argv[2]));
    QDir().mkpath(out.path());
    decodeByContext(report, out.filePath("decode_by_context.png"));
    throughput(report, out.filePath("throughput.png"));
    if (report["speculative"].is_array() && !report["speculative"].empty()) {
      speculative(report, out.filePath("speculative.png"));
    }
    std::cout << "wrote charts to " << out.path().toStdString() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kvscope-plot: error: " << e.what() << "\n";
    return 2;
  }
}
