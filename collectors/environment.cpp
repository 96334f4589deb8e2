#include "collectors/environment.h"

#include <dirent.h>
#include <link.h>

#include <cctype>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <string_view>

#include "collectors/driver_api.h"
#include "common/env.h"
#include "trace/header.h"

namespace lockstep::collectors {
namespace {

// Packages whose version can change what a job computes, by their dist-info names (PEP 503
// normalised with underscores, as wheels write them).
constexpr const char* kPackages[] = {
    "torch",
    "triton",
    "pytorch_triton",
    "jax",
    "jaxlib",
    "jax_cuda13_plugin",
    "jax_cuda13_pjrt",
    "jax_cuda12_plugin",
    "jax_cuda12_pjrt",
    "transformer_engine",
    "flash_attn",
    "numpy",
    "nvidia_cudnn_cu13",
    "nvidia_cudnn_cu12",
    "nvidia_cublas",
    "nvidia_cublas_cu12",
    "nvidia_nccl_cu13",
    "nvidia_nccl_cu12",
};

// "/usr/lib/python3/dist-packages/torch/lib/libtorch.so" -> "/usr/lib/python3/dist-packages".
std::string site_directory(std::string_view path) {
  for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = path.find(marker);
    if (at != std::string_view::npos) return std::string(path.substr(0, at + marker.size() - 1));
  }
  return {};
}

}  // namespace

nlohmann::json recorded_variables(const char* const* envp, const std::string& pattern) {
  nlohmann::json out = nlohmann::json::object();
  if (envp == nullptr) return out;
  std::optional<std::regex> extra;
  if (!pattern.empty()) {
    try {
      extra.emplace(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error&) {}
  }
  for (const char* const* entry = envp; *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals == nullptr) continue;
    const std::string name(*entry, equals);
    bool wanted = false;
    for (const char* known : env::kNumericsVars) wanted = wanted || name == known;
    if (!wanted && extra) wanted = std::regex_match(name, *extra);
    if (wanted) out[name] = std::string(equals + 1);
  }
  return out;
}

nlohmann::json python_packages(const std::vector<std::string>& loaded_paths) {
  std::set<std::string> sites;
  for (const std::string& path : loaded_paths)
    if (std::string site = site_directory(path); !site.empty()) sites.insert(site);
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& site : sites) {
    DIR* dir = ::opendir(site.c_str());
    if (dir == nullptr) continue;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      constexpr std::string_view kSuffix = ".dist-info";
      if (!name.ends_with(kSuffix)) continue;
      const std::string_view stem = name.substr(0, name.size() - kSuffix.size());
      for (const char* package : kPackages) {
        const std::string_view p = package;
        // NAME-VERSION: the version starts with a digit (torch_tb_profiler is not torch).
        if (stem.size() > p.size() + 1 && stem.starts_with(p) && stem[p.size()] == '-' &&
            std::isdigit(static_cast<unsigned char>(stem[p.size() + 1])) && !out.contains(p))
          out[std::string(p)] = std::string(stem.substr(p.size() + 1));
      }
    }
    ::closedir(dir);
  }
  return out;
}

std::vector<std::string> loaded_object_paths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

nlohmann::json environment_facts(const char* const* envp, const std::string& pattern) {
  nlohmann::json out = nlohmann::json::object();
  out[trace::kEnvironmentKey] = recorded_variables(envp, pattern);
  out[trace::kPythonPackagesKey] = python_packages(loaded_object_paths());
  // cuDNN picks convolution algorithms by version; absent (null) until the job loads it.
  using CudnnVersion = size_t (*)();
  auto cudnn = reinterpret_cast<CudnnVersion>(resolve("cudnnGetVersion"));
  out[trace::kCudnnVersionKey] = cudnn != nullptr ? nlohmann::json(cudnn()) : nullptr;
  using PyVersion = const char* (*)();
  if (auto py = reinterpret_cast<PyVersion>(resolve("Py_GetVersion"))) {
    const std::string_view text = py();  // "3.12.3 (main, ...)": the number only
    out["python"] = std::string(text.substr(0, text.find(' ')));
  }
  return out;
}

}  // namespace lockstep::collectors
