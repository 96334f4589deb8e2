#include "collectors/fatal_signals.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "trace/writer.h"

namespace lockstep::collectors {

const int kSealedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV,
                              SIGBUS,  SIGFPE, SIGILL, SIGABRT};
const int kSealedSignalCount = sizeof(kSealedSignals) / sizeof(kSealedSignals[0]);

namespace {

std::atomic<trace::TraceWriter*> g_writer{nullptr};

// Everything here is async-signal-safe: an atomic load, the writer's seal, sigaction, raise.
void seal_and_die(int signo, siginfo_t* info, void*) {
  if (trace::TraceWriter* writer = g_writer.load(std::memory_order_acquire))
    writer->seal_after_signal(signo);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signo, &default_action, nullptr);
  // A real fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL raised by the CPU) comes back when the handler
  // returns, now with the default action. A signal sent by kill or raise (si_code <= 0) is
  // blocked while its handler runs: raised again, it is delivered with the default action as
  // soon as the handler returns.
  const bool fault = signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL;
  const bool sent = info == nullptr || info->si_code <= 0;
  if (!fault || sent) raise(signo);
}

}  // namespace

void seal_trace_on_fatal_signals(trace::TraceWriter* writer) {
  static std::once_flag once;
  std::call_once(once, [writer] {
    g_writer.store(writer, std::memory_order_release);
    for (int i = 0; i < kSealedSignalCount; ++i) {
      const int signo = kSealedSignals[i];
      struct sigaction current {};
      if (sigaction(signo, nullptr, &current) != 0) continue;
      const bool is_default = !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL;
      if (!is_default) continue;  // the job handles or ignores it: not ours to decide
      struct sigaction ours {};
      ours.sa_sigaction = seal_and_die;
      sigemptyset(&ours.sa_mask);
      // SA_ONSTACK: a stack overflow's SIGSEGV runs on the thread's alternate stack if it has one.
      ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
      sigaction(signo, &ours, nullptr);
    }
  });
}

}  // namespace lockstep::collectors
