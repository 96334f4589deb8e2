// What in the job's process can change its numbers besides the GPU and CUDA libraries the header
// already names: the numerics variables that are set, the Python packages beside the job's
// loaded libraries, cuDNN's version. Read once, when the tracer starts (its header), so that
// `lockstep diff` compares two runs' environments before their ops (tools/why/environment.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::collectors {

// {"NAME": "value"} for each variable of `envp` ("NAME=value" strings) that is set and named in
// env::kNumericsVars or matched whole by `pattern` (ECMAScript; "" matches nothing; a pattern
// that does not compile matches nothing: settings.cpp validated it already).
nlohmann::json recorded_variables(const char* const* envp, const std::string& pattern);

// The versions of the Python packages that decide numerics (torch, triton, jax, jaxlib, the JAX
// CUDA plugins, ...), read from the names of their `NAME-VERSION.dist-info` directories in each
// site-packages (or dist-packages) directory that holds one of `loaded_paths`. Reading directory
// names costs one readdir per site directory and imports nothing, so it works for any job the
// shim is preloaded into (torchrun without `lockstep run`, JAX), which a hook in the job's
// Python could not promise. {} when no loaded library is in a site directory.
nlohmann::json python_packages(const std::vector<std::string>& loaded_paths);

// The paths of the objects the dynamic linker has loaded (dl_iterate_phdr).
std::vector<std::string> loaded_object_paths();

// The header's keys for the above (trace/header.h: kEnvironmentKey, kPythonPackagesKey,
// kCudnnVersionKey), plus "python": the interpreter's version when the process is Python.
nlohmann::json environment_facts(const char* const* envp, const std::string& pattern);

}  // namespace lockstep::collectors
