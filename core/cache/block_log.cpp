#include "core/cache/block_log.h"

namespace kvscope {

std::string blockOperationName(BlockOperation operation) {
  switch (operation) {
    case BlockOperation::Allocate: return "allocate";
    case BlockOperation::Reuse: return "reuse";
    case BlockOperation::Free: return "free";
    case BlockOperation::Unmap: return "unmap";
  }
  return "?";
}

}  // namespace kvscope
