/* A stand-in for the shim's C API (collectors/lockstep.h) that writes each call as one line to
 * $LOCKSTEP_TEST_RECORD, for the CPU tests of the Python hooks: what Python sends, not what the
 * shim does with it (tests/cpu/collectors/state_records_test.cpp covers that). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "collectors/lockstep.h"  /* LOCKSTEP_SAME_NAMES, the prototypes it stands in for */

static void line(const char* text) {
  const char* path = getenv("LOCKSTEP_TEST_RECORD");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

void lockstep_step(void) { line("step\n"); }
void lockstep_step_number(unsigned long long n) {
  char buf[64];
  snprintf(buf, sizeof buf, "step %llu\n", n);
  line(buf);
}
void lockstep_mark(const char* name) {
  char buf[512];
  snprintf(buf, sizeof buf, "mark %s\n", name);
  line(buf);
}
void lockstep_marker(const char* text) {
  char buf[512];
  snprintf(buf, sizeof buf, "marker %s\n", text);
  line(buf);
}
void lockstep_step_order_streams(void) { line("stream order\n"); }
/* As the shim's: set LOCKSTEP_TEST_CAPTURE_BEGUN for a process in which a capture began. */
int lockstep_capture_begun(void) { return getenv("LOCKSTEP_TEST_CAPTURE_BEGUN") != NULL; }
void lockstep_fingerprint_many(unsigned long long n, const void* const* ptrs,
                               const unsigned long long* bytes, const char* const* names,
                               void* stream, int kind) {
  char buf[512];
  /* LOCKSTEP_SAME_NAMES (collectors/lockstep.h) is no part of the kind, as in the shim; shown
   * as " same-names" where LOCKSTEP_TEST_SHOW_SAME_NAMES is set. */
  const int same_names = kind >= 0 && (kind & LOCKSTEP_SAME_NAMES) != 0;
  if (kind >= 0) kind &= ~LOCKSTEP_SAME_NAMES;
  snprintf(buf, sizeof buf, "state n=%llu kind=%d stream=%p%s\n", n, kind, stream,
           same_names && getenv("LOCKSTEP_TEST_SHOW_SAME_NAMES") ? " same-names" : "");
  line(buf);
  for (unsigned long long i = 0; i < n; ++i) {
    snprintf(buf, sizeof buf, "  %s %p %llu\n", names[i], ptrs[i], bytes[i]);
    line(buf);
  }
}

/* Scopes: which thread pushed matters (a module's backward runs on autograd's thread). */
static const char* thread_tag(void) { return gettid() == getpid() ? "" : " [other thread]"; }
void lockstep_scope_push(const char* name) {
  char buf[512];
  snprintf(buf, sizeof buf, "push %s%s\n", name, thread_tag());
  line(buf);
}
void lockstep_scope_pop(void) {
  char buf[64];
  snprintf(buf, sizeof buf, "pop%s\n", thread_tag());
  line(buf);
}
