// Per-function call counts kept by each stub library, read back by the tests.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace stub {

inline std::mutex& counter_mutex() {
  static std::mutex m;
  return m;
}
inline std::map<std::string, int>& counters() {
  static std::map<std::string, int> c;
  return c;
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
