#include "tools/python_env.h"

#include <filesystem>

namespace lockstep::tools {

namespace fs = std::filesystem;

std::string python_package_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const char* rel : {"../python", "../lib/python3/dist-packages"}) {
    const fs::path dir = (exe.parent_path() / rel).lexically_normal();
    if (fs::exists(dir / "lockstep" / "_boot" / "sitecustomize.py", ec)) return dir.string();
  }
  return {};
}

std::string python_path(const char* user, const std::string& dir) {
  const std::string kept = user != nullptr ? user : "";
  if (dir.empty()) return kept;
  const std::string ours = (fs::path(dir) / "lockstep" / "_boot").string() + ":" + dir;
  return kept.empty() ? ours : ours + ":" + kept;
}

std::string python_path(const char* user) { return python_path(user, python_package_dir()); }

}  // namespace lockstep::tools
