// LOCKSTEP_HOT marks a function on the path of every traced call (a kernel launch at level broad
// runs all of them). GCC and Clang place hot functions together in .text.hot: between two
// launches the job's own work evicts the shim's code from the CPU caches, and a path laid out
// in a few neighbouring lines comes back in fewer misses than one spread over the library.
#pragma once

#define LOCKSTEP_HOT __attribute__((hot))

// LOCKSTEP_LAUNCH_PATH marks the functions of a kernel launch's own path at broad (the launch
// interceptors, kernel_launch_begin/end, the stamp, the writer's stage and commit: a few KiB).
// Hot functions are grouped per object file, so the path still spread over the 48 KiB of
// .text.hot, every launch touching four or more of its pages (an iTLB entry each, where the
// job's own code keeps evicting them). Sections named .text.sorted.* are placed together, right
// after .text.hot, sorted by name across every object file (GNU ld 2.34 and later, lld): one
// name for the whole path lays it out in one run. tests/cpu/interpose/exports_test.cpp reads
// its span with nm. Each starts a cache line (aligned(64)): a launch runs only part of each
// function, and a function that straddles lines where it could fit fewer costs a miss for
// nothing (54 against 52 code lines a cold launch, bench/collectors/launch_lines.py; the padding
// is never fetched).
//
// Within the run, by the sections' names: the collectors' and the writer's functions first
// (LOCKSTEP_LAUNCH_PATH), then the interceptors the jobs launch through (LOCKSTEP_LAUNCH_ENTRY:
// __cudaLaunchKernel for PyTorch's own kernels, cuLaunchKernel for JAX and Triton), then their
// twins (LOCKSTEP_LAUNCH_TWIN: the _ptsz variants). An interceptor inlines its whole traced call,
// the paths a launch rarely takes (LOCKSTEP_DEBUG's timing, validation, a replay) at its end:
// ~4 KiB each, of which a launch runs the first few lines. A function in a section of its own
// choosing is never split into hot and cold parts, so the twins go after the path, not inside it.
#define LOCKSTEP_LAUNCH_SECTION(order) \
  __attribute__((hot, aligned(64), section(".text.sorted.lockstep_launch_" order)))
#define LOCKSTEP_LAUNCH_PATH LOCKSTEP_LAUNCH_SECTION("1_path")
#define LOCKSTEP_LAUNCH_ENTRY LOCKSTEP_LAUNCH_SECTION("2_entry")
#define LOCKSTEP_LAUNCH_TWIN LOCKSTEP_LAUNCH_SECTION("3_twin")
