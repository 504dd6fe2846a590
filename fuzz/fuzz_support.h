#pragma once
// Shared by the fuzz harnesses (fuzz/*_fuzz.cpp). Each harness defines
// LLVMFuzzerTestOneInput; it is linked either with libFuzzer (-DKVSCOPE_FUZZ=ON,
// clang) or with replay_main.cpp, which runs the regression corpus in ctest.
// A kvscope::Error is the expected outcome for a bad input; anything else
// (a crash, a sanitizer report, another exception escaping) is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>

#include "core/error.h"

namespace kvscope::fuzz {

// True in the ctest replay (replay_main.cpp sets it), false under libFuzzer,
// where printing every rejection would slow each execution down.
inline bool& replaying() {
  static bool on = false;
  return on;
}

// The expected answer to a bad input. The replay prints it, so the ctest log
// shows that each regression input is refused with a named error.
inline void rejected(const kvscope::Error& error) {
  if (replaying()) std::cout << "  refused: " << error.what() << std::endl;
}

// The bytes as a file the readers can open by path (an anonymous in-memory
// file: no disk traffic, nothing to clean up). Closes it when destroyed.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("kvscope-fuzz", MFD_CLOEXEC);
    size_t done = 0;
    while (fd_ >= 0 && done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace kvscope::fuzz
