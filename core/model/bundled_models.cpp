#include "core/model/bundled_models.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace kvscope {
namespace fs = std::filesystem;

namespace {
std::string executableDirectory() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string() : exe.parent_path().string();
}
}  // namespace

std::vector<std::string> bundledModelSearchPath() {
  std::vector<std::string> path;
  if (const char* env = std::getenv("KVSCOPE_MODELS_DIR"); env && *env) path.emplace_back(env);
  if (const std::string exe_dir = executableDirectory(); !exe_dir.empty()) {
    path.push_back((fs::path(exe_dir) / ".." / "share" / "kvscope" / "models").lexically_normal().string());
  }
  path.push_back(std::string(KVSCOPE_INSTALL_DATADIR) + "/models");
  path.push_back(std::string(KVSCOPE_SOURCE_DIR) + "/resources/models");
  return path;
}

std::string bundledModelDirectory(const std::string& role) {
  std::string searched;
  for (const std::string& root : bundledModelSearchPath()) {
    const fs::path candidate = fs::path(root) / role;
    if (fs::exists(candidate / "config.json")) return candidate.string();
    searched += "\n  " + candidate.string();
  }
  throw Error("no bundled " + role + " model found; searched:" + searched +
              "\n(give a model directory explicitly, or set KVSCOPE_MODELS_DIR)");
}

}  // namespace kvscope
