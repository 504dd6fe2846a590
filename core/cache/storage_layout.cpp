#include "core/cache/storage_layout.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace kvscope {

namespace {

int64_t parseBlockSize(const std::string& text, const std::string& digits) {
  const bool all_digits =
      !digits.empty() && digits.size() <= 9 &&
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  const int64_t size = all_digits ? std::stoll(digits) : -1;
  if (size < 1 || size > StorageLayout::kMaxBlockSize) {
    throw Error("cache layout '" + text + "': the block size must be a whole number from 1 to " +
                std::to_string(StorageLayout::kMaxBlockSize) + " rows");
  }
  return size;
}

}  // namespace

StorageLayout parseStorageLayout(const std::string& text) {
  if (text == "contiguous") return StorageLayout{};
  if (text == "paged") return StorageLayout{true, StorageLayout::kDefaultBlockSize};
  const std::string prefix = "paged:";
  if (text.rfind(prefix, 0) == 0) return StorageLayout{true, parseBlockSize(text, text.substr(prefix.size()))};
  throw Error("cache layout '" + text + "' is not one of: contiguous, paged, paged:BLOCK");
}

std::string storageLayoutName(const StorageLayout& layout) {
  return layout.paged ? "paged:" + std::to_string(layout.block_size) : "contiguous";
}

}  // namespace kvscope
