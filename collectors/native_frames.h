// The native frames of the calling thread above the shim (backtrace(3), dladdr(3), demangled):
// for Stack records (stack_records.h), the library calls that led to a CUDA launch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::collectors {

// "SYMBOL+0xOFF (LIBRARY)" or "0xADDR (LIBRARY)", innermost first, the shim's own frames left
// out, at most `max`. Slow (a symbol lookup per frame): for the few launches that ask.
std::vector<std::string> native_frames(size_t max);

}  // namespace lockstep::collectors
