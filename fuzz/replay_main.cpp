// Replays files through one fuzz harness without libFuzzer: ctest runs the
// regression corpus (fuzz/regression/<harness>/) this way in every build.
// Usage: <replay> FILE_OR_DIR...  Prints the error each input is refused with;
// exits non-zero only by crashing (or when given no input).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::cout << "replaying " << path.filename().string() << " (" << bytes.size() << " bytes)" << std::endl;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  kvscope::fuzz::replaying() = true;  // print each input's refusal
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> paths;
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) paths.push_back(entry.path());
      std::sort(paths.begin(), paths.end());
      for (const auto& p : paths) replay(p), ++files;
    } else {
      replay(arg), ++files;
    }
  }
  std::cout << files << " inputs replayed, no crash" << std::endl;
  return files > 0 ? 0 : 1;
}
