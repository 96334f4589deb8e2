#include "debug_log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/env.h"

namespace lockstep::interpose {

bool debug_enabled() {
  static std::atomic<int> state{-1};  // -1: not read yet
  int s = state.load(std::memory_order_relaxed);
  if (s < 0) {
    const char* v = std::getenv(env::kDebug);
    s = (v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0) ? 1 : 0;
    state.store(s, std::memory_order_relaxed);
  }
  return s != 0;
}

void debug_log(const char* format, ...) {
  char line[512];
  int n = std::snprintf(line, sizeof line, "lockstep[%d] interpose: ", static_cast<int>(getpid()));
  if (n < 0) return;
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  if (m < 0) return;
  size_t len = std::strlen(line);
  line[len++] = '\n';
  // One write per line so lines from several threads do not interleave.
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}

}  // namespace lockstep::interpose
