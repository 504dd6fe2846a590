#pragma once
// Finds the models kvscope ships in resources/models (target and drafter),
// in an installed build as well as in the source tree.
#include <string>
#include <vector>

namespace kvscope {

// Directories searched, in order: $KVSCOPE_MODELS_DIR, <exe>/../share/kvscope/models,
// the configured install data dir, the source tree's resources/models.
std::vector<std::string> bundledModelSearchPath();

// The bundled model of `role` ("target" or "drafter"). Throws Error listing
// the places searched when none is found.
std::string bundledModelDirectory(const std::string& role);

}  // namespace kvscope
