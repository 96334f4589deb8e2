// Diagnostics of the interposition layer, printed to stderr only when LOCKSTEP_DEBUG is set
// (and not "0"). Formatting happens only then; the check is one relaxed load.
#pragma once

namespace lockstep::interpose {

bool debug_enabled();
void debug_log(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace lockstep::interpose

#define LOCKSTEP_DEBUG_LOG(...)                                                                \
  do {                                                                                         \
    if (::lockstep::interpose::debug_enabled()) ::lockstep::interpose::debug_log(__VA_ARGS__); \
  } while (0)
