// Precompiled header for kvscope_core: the heavy libtorch headers, parsed once.
#pragma once
#include <torch/torch.h>
