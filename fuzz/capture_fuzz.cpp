// Fuzzes CaptureFile::open: a .kvcapture's safetensors container, its
// manifest JSON and every cross-reference between the two.
#include "core/capture/capture_file.h"
#include "core/error.h"
#include "fuzz/fuzz_support.h"

namespace {

// Touch what a checker touches: the decoded slots of every state and
// sequence of a batch (small layers only: a legitimate 2^24-slot layer is slow to decode, not a bug)
// and the first rows of every layer as float32.
void touch(const kvscope::CaptureFile& capture) {
  volatile int64_t sink = 0;
  for (const auto& call : capture.manifest().calls)
    for (const auto* state : {&call.before, &call.after})
      if (state->has_value())
        for (const auto& layer : (*state)->layers)
          if (layer.slot_count * static_cast<int64_t>(layer.sequence_runs.size()) <= 4096)
            for (size_t sequence = 0; sequence < layer.sequence_runs.size(); ++sequence)
              for (int64_t row : layer.sequenceSlotRows(sequence)) sink = sink + row;
  for (const auto& model : capture.manifest().models)
    if (model)
      for (int64_t layer = 0; layer < model->layers; ++layer) {
        const int64_t rows = std::min<int64_t>(capture.rowCount(model->role, layer), 2);
        for (float value : capture.rowsFloat32(model->role, layer, kvscope::CaptureKV::Values, 0, rows))
          sink = sink + static_cast<int64_t>(value == value);
      }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvscope::fuzz::MemoryFile file(data, size);
  try {
    touch(*kvscope::CaptureFile::open(file.path()));
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
