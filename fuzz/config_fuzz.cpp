// Fuzzes config.json parsing: the JSON limits, then parseModelConfig
// (architectures, dimensions, rope scaling, token ids).
#include <string_view>

#include "core/error.h"
#include "core/model/json_limits.h"
#include "core/model/model_config.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const nlohmann::json j = kvscope::parseJsonWithLimits(text, "config.json", kvscope::kConfigJsonLimits);
    const kvscope::ModelConfig config = kvscope::parseModelConfig(j, "config.json");
    (void)kvscope::describe(config);
  } catch (const kvscope::Error& e) {
    kvscope::fuzz::rejected(e);
  }
  return 0;
}
