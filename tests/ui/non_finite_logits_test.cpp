// In the GUI: a verify whose logits turn NaN mid-session shows the
// error dialog naming the layer, and the session stays as it was before the
// failing step (same rounds, same tokens, still browsable), instead of a
// run that carries on with NaN and picks token 0 forever.
// libtorch first: Qt's `slots` macro would break its headers.
#include <torch/types.h>

#include "core/model/causal_lm.h"
#include "core/model/checkpoint.h"

#include <QApplication>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <limits>

#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

namespace fs = std::filesystem;

// A copy of gpt2-tiny whose position embeddings from `first_bad` on are NaN:
// the prompt and the first rounds compute normally, a later verify does not.
std::string poisonedGpt2(const QTemporaryDir& dir, int64_t first_bad) {
  const fs::path from = fs::path(KVSCOPE_FIXTURES) / "models" / "gpt2-tiny";
  const fs::path to = dir.path().toStdString();
  for (const auto& entry : fs::directory_iterator(from)) fs::copy_file(entry.path(), to / entry.path().filename());
  const Checkpoint ckpt = Checkpoint::open(from.string());
  NamedTensors tensors;
  for (const std::string& name : ckpt.names()) {
    at::Tensor t = ckpt.load(name, torch::kFloat32);
    if (name.find("wpe.weight") != std::string::npos) t.narrow(0, first_bad, t.size(0) - first_bad).fill_(std::numeric_limits<float>::quiet_NaN());
    tensors.emplace_back(name, t);
  }
  saveTensors((to / "model.safetensors").string(), tensors, {{"format", "pt"}});
  return to.string();
}

}  // namespace

class NonFiniteLogitsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { useTestSettings("non_finite_logits_test"); }

  void aNanVerifyShowsTheLayerAndKeepsTheSession() {
    QTemporaryDir dir;
    constexpr int64_t kFirstBad = 24;
    MainWindowOptions options;
    options.models.target_dir = poisonedGpt2(dir, kFirstBad);
    options.models.drafter_dir = KVSCOPE_FIXTURES "/models/gpt2-tiny";
    options.restore_layout = false;
    options.session.prompt = "Once";
    options.session.options.max_new_tokens = 64;
    MainWindow window(options);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QVERIFY2(errorDialog() == nullptr, "the prompt sits before the NaN positions");

    // Step until a verify reaches position kFirstBad: the step fails there.
    int64_t rounds_before = 0, tokens_before = 0;
    for (int step = 0; step < 64 && errorDialog() == nullptr; ++step) {
      if (!window.context().atLatest()) window.context().setCursor(window.context().latest());
      rounds_before = window.context().latest().round;
      tokens_before = static_cast<int64_t>(window.context().snapshot()->sequence.size());
      QVERIFY2(tokens_before < kFirstBad + 8, "a position past the NaN rows computed without an error");
      QTRY_VERIFY_WITH_TIMEOUT(window.stepRoundAction()->isEnabled(), kTimeout);
      window.stepRoundAction()->trigger();
      QTRY_VERIFY_WITH_TIMEOUT(!window.controller().busy(), kTimeout);
      QTest::qWait(50);  // the failure's dialog is posted after the worker's signal
    }
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    const QString message = errorDialog()->informativeText();
    QVERIFY2(message.contains(QStringLiteral("non-finite logits")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("in layer 0")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("transformer.wpe.weight")), qPrintable(message));
    errorDialog()->accept();

    // The session is the one before the failing step: its rounds and tokens,
    // browsable, and no NaN-driven tokens were appended.
    QVERIFY(window.context().snapshot() != nullptr);
    QCOMPARE(window.context().latest().round, rounds_before);
    QCOMPARE(static_cast<int64_t>(window.context().snapshot()->sequence.size()), tokens_before);
    QVERIFY(!window.controller().busy());

    // Stepping again meets the same position and fails the same way: the
    // failed step left nothing half-done behind it.
    QTRY_VERIFY_WITH_TIMEOUT(window.stepRoundAction()->isEnabled(), kTimeout);
    window.stepRoundAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    QCOMPARE(errorDialog()->informativeText(), message);
    errorDialog()->accept();
    QCOMPARE(window.context().latest().round, rounds_before);
  }
};

QTEST_MAIN(NonFiniteLogitsTest)
#include "non_finite_logits_test.moc"
