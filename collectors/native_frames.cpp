#include "collectors/native_frames.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace lockstep::collectors {
namespace {

std::string demangled(const char* symbol) {
  int status = 0;
  char* out = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  std::string text = status == 0 && out != nullptr ? out : symbol;
  std::free(out);
  constexpr size_t kMaxSymbol = 240;  // a template-heavy name: its start says enough
  if (text.size() > kMaxSymbol) text = text.substr(0, kMaxSymbol) + "...";
  return text;
}

std::string_view base_name(const char* path) {
  std::string_view p = path != nullptr ? path : "?";
  const size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

}  // namespace

std::vector<std::string> native_frames(size_t max) {
  std::vector<std::string> frames;
  constexpr int kDepth = 64;
  void* addresses[kDepth];
  const int depth = backtrace(addresses, kDepth);
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&native_frames), &self);  // the shim's own object
  for (int i = 0; i < depth && frames.size() < max; ++i) {
    Dl_info info{};
    if (dladdr(addresses[i], &info) == 0) {
      frames.push_back(fmt::format("{}", addresses[i]));
      continue;
    }
    if (self.dli_fbase != nullptr && info.dli_fbase == self.dli_fbase) continue;
    const auto at = reinterpret_cast<uintptr_t>(addresses[i]);
    if (info.dli_sname != nullptr)
      frames.push_back(fmt::format("{}+0x{:x} ({})", demangled(info.dli_sname),
                                   at - reinterpret_cast<uintptr_t>(info.dli_saddr),
                                   base_name(info.dli_fname)));
    else
      frames.push_back(fmt::format("0x{:x} ({})",
                                   at - reinterpret_cast<uintptr_t>(info.dli_fbase),
                                   base_name(info.dli_fname)));
  }
  return frames;
}

}  // namespace lockstep::collectors
