// Which of our wrappers stands for a driver entry point handed out by cuGetProcAddress or
// cudaGetDriverEntryPoint*, from driver_entry_points.def.
#pragma once

#include "interception.h"

namespace lockstep::interpose {

// The pointer to give the caller instead of `real` (the driver's answer for base name `symbol`
// at `cuda_version`, per-thread variant or not): our wrapper for that exact variant, or `real`
// when we do not wrap it.
void* substitute_entry_point(const char* symbol, int cuda_version, bool per_thread, void* real);

}  // namespace lockstep::interpose
