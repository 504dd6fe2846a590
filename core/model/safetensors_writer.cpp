// Safetensors writer: header JSON padded to an 8-byte boundary, then the
// tensors' bytes in the given order. Written to a temp file in the same
// directory, fsynced and renamed over the target, so the target is never
// left half-written.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/model/safetensors.h"

namespace kvscope {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100000000;

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// numel x dtype size; fails on negative dimensions and on overflow.
uint64_t expectedBytes(const std::string& path, const StWriteTensor& tensor) {
  uint64_t nbytes = stDTypeSize(tensor.dtype);
  bool overflow = false;
  bool zero = false;
  for (int64_t dim : tensor.shape) {
    if (dim < 0)
      fail(path, "tensor '" + tensor.name + "' has a negative dimension in shape " +
                     shapeString(tensor.shape));
    zero = zero || dim == 0;
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(dim), &nbytes);
  }
  if (zero) return 0;
  if (overflow)
    fail(path, "tensor '" + tensor.name + "' shape " + shapeString(tensor.shape) +
                   " overflows 64 bits");
  return nbytes;
}

std::string buildHeader(const std::string& path, const std::vector<StWriteTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    if (tensor.name == "__metadata__")
      fail(path, "'__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(tensor.name).second)
      fail(path, "duplicate tensor name '" + tensor.name + "'");
    const uint64_t expected = expectedBytes(path, tensor);
    if (tensor.nbytes != expected)
      fail(path, "tensor '" + tensor.name + "' has " + std::to_string(tensor.nbytes) +
                     " bytes but shape " + shapeString(tensor.shape) + " x " +
                     stDTypeName(tensor.dtype) + " needs " + std::to_string(expected));
    if (tensor.nbytes > 0 && tensor.data == nullptr)
      fail(path, "tensor '" + tensor.name + "' has no data");
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = stDTypeName(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + tensor.nbytes};
    header[tensor.name] = std::move(entry);
    offset += tensor.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes)
    fail(path, "header of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  return text;
}

// Owns the temp file until commit(): closes and removes it on failure.
class TempFile {
 public:
  TempFile(std::string target, std::string temp) : target_(std::move(target)), temp_(std::move(temp)) {
    // O_EXCL: never write into a file someone else is writing.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(target_, "cannot create temp file '" + temp_ + "': " + std::strerror(errno));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t size) {
    const auto* bytes = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t written = ::write(fd_, bytes, size);
      if (written < 0) {
        if (errno == EINTR) continue;
        fail(target_, "cannot write temp file '" + temp_ + "': " + std::strerror(errno));
      }
      bytes += written;
      size -= static_cast<size_t>(written);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0)
      fail(target_, "cannot fsync temp file '" + temp_ + "': " + std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      fail(target_, "cannot close temp file '" + temp_ + "': " + std::strerror(errno));
    if (::rename(temp_.c_str(), target_.c_str()) != 0)
      fail(target_, "cannot rename temp file '" + temp_ + "' over it: " + std::strerror(errno));
    committed_ = true;
    syncDirectory();
  }

 private:
  // Best effort: make the rename itself durable.
  void syncDirectory() {
    const size_t slash = target_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : target_.substr(0, slash));
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }

  std::string target_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Unique per process and per call, so two saves of one path (two threads, or
// the GUI and the CLI) never share a temp file; a save killed by SIGKILL
// leaves only its own temp file behind, never a damaged target.
std::string tempName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

void writeSafetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = buildHeader(path, tensors, metadata);
  uint8_t length[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) length[i] = static_cast<uint8_t>(n & 0xff);

  TempFile temp(path, tempName(path));
  temp.write(length, sizeof(length));
  temp.write(header.data(), header.size());
  for (const auto& tensor : tensors)
    if (tensor.nbytes > 0) temp.write(tensor.data, tensor.nbytes);
  temp.commit();
}

}  // namespace kvscope
