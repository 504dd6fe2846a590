#pragma once
// What the CPU running kvscope can do, asked once per process. The
// hand-written kernels (core/model/few_rows.h, query_attention_avx512.h,
// row_kernels.h, core/decode/sampling.h) pick their instruction set from
// these: AVX-512 with FMA, else AVX2 with FMA (and F16C for 16-bit weights),
// else the portable loops every CPU runs.

namespace kvscope {

bool cpuHasAvx512();      // AVX-512F and FMA
bool cpuHasAvx2Fma();     // AVX2 and FMA
bool cpuHasAvx2FmaF16c(); // AVX2, FMA and F16C (half-precision conversions)

}  // namespace kvscope
