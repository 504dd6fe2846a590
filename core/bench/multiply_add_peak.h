#pragma once
// The float32 multiply-adds one thread of this machine can do per second:
// independent chains of fused multiply-adds in registers (512-bit with
// AVX-512, else 256-bit with AVX2 and FMA), nothing read from memory. A
// forward of k rows must make k times a row's multiply-adds, so this bounds
// from below what a verify costs next to a decode step
// (docs/performance-speculative.md); it is measured rather than read from a
// table because the width and count of a CPU's FMA units vary within one
// instruction set (one 512-bit FMA per cycle on some AVX-512 cores, two on
// others).
#include <cstdint>

#include "core/model/causal_lm.h"

namespace kvscope {

// Multiply-adds per second on the calling thread (the median of 5 timed
// runs of about 5 ms each); 0 on a CPU with neither instruction set.
double multiplyAddPeakPerSecond();

// The multiply-adds of one row through a model's weight matrices (the head
// included, embedding lookups not): what a k-row forward makes k times.
int64_t matrixMultiplyAddsPerRow(const CausalLM& model);

}  // namespace kvscope
