// Per-function call counts kept by each stub library, read back by the tests.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace stub {

// Never destroyed: the shim calls into the stubs from exit handlers (validation's flush), after
// static destructors of the stubs may have run.
inline std::mutex& counter_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
inline std::map<std::string, int>& counters() {
  static auto* c = new std::map<std::string, int>;
  return *c;
}
inline void count(const char* name) {
  std::lock_guard<std::mutex> lock(counter_mutex());
  ++counters()[name];
}
inline int calls(const char* name) {
  std::lock_guard<std::mutex> lock(counter_mutex());
  auto it = counters().find(name);
  return it == counters().end() ? 0 : it->second;
}

}  // namespace stub

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))
