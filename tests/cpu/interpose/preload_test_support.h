// Shared helpers of the tests that run with the test shim preloaded.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace interpose_test {

// The fake collectors' log (one line per event), via the test shim's own C API.
inline std::string fake_log() {
  auto fn = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "lockstep_fake_log"));
  if (fn == nullptr) return "<shim not preloaded>";
  char* text = fn();
  std::string s = text;
  std::free(text);
  return s;
}
inline void clear_fake_log() {
  if (auto fn = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "lockstep_fake_clear"))) fn();
}
inline void* fake_resolve(const char* name) {
  auto fn = reinterpret_cast<void* (*)(const char*)>(dlsym(RTLD_DEFAULT, "lockstep_fake_resolve"));
  return fn != nullptr ? fn(name) : nullptr;
}

inline std::vector<std::string> lines_starting(const std::string& log, const std::string& prefix) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
    start = end + 1;
  }
  return out;
}

inline bool contains(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

// A library opened by path for the test's lifetime.
inline void* open_library(const char* path, int mode) {
  void* h = dlopen(path, mode);
  EXPECT_NE(h, nullptr) << path << ": " << dlerror();
  return h;
}

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

class PreloadedShim : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(dlsym(RTLD_DEFAULT, "lockstep_fake_log"), nullptr)
        << "run this test with LD_PRELOAD=liblockstep_testshim.so (ctest does)";
    unsetenv("LOCKSTEP_FAKE_INACTIVE");
    clear_fake_log();
  }
};

}  // namespace interpose_test
