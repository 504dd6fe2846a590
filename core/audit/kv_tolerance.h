#pragma once
// The one rule for "these K/V rows are the reference forward's": a row is
// wrong when max |cached - reference| over a head exceeds
// absolute + relative * max |reference| of that head's row. The audit, the
// root cause of a session and the check of a capture all judge rows by it,
// with the tolerance of the precision the rows were stored in: float32 rows
// differ from a recomputation only by the order of floating-point sums;
// 16-bit rows by their rounding, and by 16-bit activations upstream of layers
// above the first. Torch-free: the numbers are plain data.
#include "core/audit/audit_report.h"
#include "core/model/safetensors.h"

namespace kvscope {

// The tolerance for rows stored as `dtype` (float32 for any other dtype).
AuditTolerance kvTolerance(StDType dtype);

// Whether a row whose largest difference is `error` agrees with a reference
// row whose largest magnitude is `scale`.
inline bool withinTolerance(double error, double scale, const AuditTolerance& tolerance) {
  return error <= tolerance.absolute + tolerance.relative * scale;
}

}  // namespace kvscope
