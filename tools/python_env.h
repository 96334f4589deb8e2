// What a Python job started by `lockstep run` gets on its path: the `lockstep` package (so that
// `import lockstep` works in the job: lockstep.step(), lockstep.fingerprint()) and the package's
// start-up directory lockstep/_boot, whose sitecustomize.py arms the PyTorch hooks (state
// records after every optimizer step) when, and only when, the job imports torch, then runs the
// sitecustomize it shadows. Nothing else in the job changes.
#pragma once

#include <string>

namespace lockstep::tools {

// The directory that holds the lockstep package, next to this binary: ../python (build tree:
// build/tools/lockstep, build/python/lockstep) or ../lib/python3/dist-packages (installed);
// empty when neither holds lockstep/_boot/sitecustomize.py.
std::string python_package_dir();

// PYTHONPATH for the job: "<dir>/lockstep/_boot:<dir>" before `user` (the job's own
// PYTHONPATH, kept after them; null or empty when unset); `user` unchanged (empty when null)
// when the package is not found. `dir` defaults to python_package_dir().
std::string python_path(const char* user);
std::string python_path(const char* user, const std::string& dir);

}  // namespace lockstep::tools
