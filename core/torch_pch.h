// Precompiled header for kvscope_core, the CLI and the core tests: the tensor
// API (ATen, torch:: factories, autograd's no-grad and inference modes) and
// the thread pool, parsed once. Not <torch/torch.h>: its nn, optim, data and
// serialisation headers double the header to 570 MB, and loading that costs
// every translation unit 3.7 s even when it uses none of it (measured: an
// empty file 3.7 s vs 1.2 s). The few trainer files include what they use.
#pragma once
#include <ATen/Parallel.h>
#include <torch/types.h>
