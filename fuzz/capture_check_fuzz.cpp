// Fuzzes what lies past CaptureFile::open: whatever the reader accepts is
// built into the cache timeline, walked in the order it happened, checked
// without models (the bookkeeping alone, as with no checkpoint at hand) and
// turned into the snapshot the GUI shows. A kvscope::Error is an expected
// answer (a capture the timeline cannot follow, or too large to check);
// a crash, a sanitizer report, any other exception escaping, or an input
// that takes far longer than its size warrants, is a finding. Links
// libtorch (kvscope_core): the timeline holds rows as tensors.
#include "core/capture/capture_file.h"
#include "core/check/capture_check.h"
#include "core/check/capture_record_view.h"
#include "core/check/capture_snapshot.h"
#include "core/check/capture_timeline.h"
#include "core/check/sequence_check.h"
#include "core/error.h"
#include "core/snapshot/snapshot_builder.h"
#include "fuzz/fuzz_support.h"

namespace {

void checkAndShow(const std::string& path) {
  const auto file = kvscope::CaptureFile::open(path);
  // Every sequence of a batch, through its own view, as check and the GUI do.
  kvscope::SequenceCheck check = kvscope::checkEverySequence(*file, {}, {});
  const kvscope::CaptureCheckReport& report = check.report;
  kvscope::CaptureSnapshotSource source;
  source.path = path;
  source.engine = file->manifest().engine_name;
  source.target_name = "target";
  source.drafter_name = file->manifest().models[1] ? "drafter" : "none";
  source.notes = report.notes;
  kvscope::SnapshotBuilder builder;
  const auto snapshot = kvscope::captureSnapshot(*check.view, *check.timeline, std::move(*check.record),
                                                 check.shownReport(), source, builder);
  if (kvscope::fuzz::replaying())
    std::cout << "  checked: " << (report.root_cause ? "root cause: " + report.root_cause->what : std::string("ok"))
              << std::endl;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvscope::fuzz::MemoryFile file(data, size);
  try {
    checkAndShow(file.path());
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
