// LOCKSTEP_HOT marks a function on the path of every traced call (a kernel launch at level broad
// runs all of them). GCC and Clang place hot functions together in .text.hot: between two
// launches the job's own work evicts the shim's code from the CPU caches, and a path laid out
// in a few neighbouring lines comes back in fewer misses than one spread over the library.
#pragma once

#define LOCKSTEP_HOT __attribute__((hot))
