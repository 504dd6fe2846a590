#include "core/audit/kv_tolerance.h"

namespace kvscope {

AuditTolerance kvTolerance(StDType dtype) {
  switch (dtype) {
    case StDType::F16: return {1e-3, 8e-3};   // 11-bit mantissa, and float16 activations upstream
    case StDType::BF16: return {1e-2, 4e-2};  // 8-bit mantissa
    default: return {1e-5, 1e-4};             // float32: only the order of sums differs
  }
}

}  // namespace kvscope
