// The calling thread's Python frames, read through CPython's C API found in the process with
// dlsym (the shim does not link Python; a job without it gets none). For Stack records
// (stack_records.h): the line of the job's model that launched a kernel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::collectors {

// "FILE:LINE in FUNC", innermost first, at most `max`. Empty when the process runs no Python,
// the interpreter is not initialised or is finalising, or this thread never ran Python (the
// autograd engine's backward threads). Takes the GIL for the read, as PyTorch's own Python
// tracebacks of allocations do: the launching Python thread has released it inside the op, and
// it waits only while another thread holds it. Never raises: a Python error is cleared.
std::vector<std::string> python_frames(size_t max);

}  // namespace lockstep::collectors
