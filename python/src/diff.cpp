// The diff and verify for Python: tools::run_diff (what `lockstep diff` runs), its result as the
// versioned JSON report (tools/README.md, "JSON schema"), which lockstep/_diff.py turns into
// objects; and run_verify.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "python/src/core.h"
#include "tools/commands/commands.h"
#include "tools/report.h"

namespace lockstep::python {

void bind_diff(py::module_& m) {
  m.def(
      "diff",
      [](const std::string& a, const std::string& b, std::optional<int> rank,
         const std::string& steps, int context, bool exhaustive, bool salvage, int threads,
         const std::string& align) {
        tools::DiffRequest request;
        request.a = a;
        request.b = b;
        request.rank = rank;
        request.steps = steps;
        request.context = context;
        request.exhaustive = exhaustive;
        request.salvage = salvage;
        request.threads = threads;
        request.align = align;
        request.print = false;
        tools::DiffResult result;
        tools::DiffContext where;
        int code = 0;
        {
          // The diff runs its ranks on worker threads and touches no Python object.
          py::gil_scoped_release release;
          code = tools::run_diff(request, &result, &where);
        }
        return py::make_tuple(code, to_python(tools::diff_json(result, where)));
      },
      py::arg("a"), py::arg("b"), py::arg("rank") = py::none(), py::arg("steps") = "",
      py::arg("context") = 3, py::arg("exhaustive") = false, py::arg("salvage") = false,
      py::arg("threads") = 0, py::arg("align") = "auto",
      "(exit code, report): `lockstep diff A B --json`, without printing");

  m.def(
      "verify",
      [](const std::string& dir) {
        py::gil_scoped_release release;
        return tools::run_verify(dir, /*print=*/false);
      },
      py::arg("dir"), "0 when `lockstep verify DIR` certifies the run complete, else 2");
}

}  // namespace lockstep::python
