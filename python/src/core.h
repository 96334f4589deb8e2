// lockstep._core: the C++ trace reader (trace/reader.h, tools/run_set.h) and diff
// (tools/commands' run_diff) bound for the `lockstep` Python package. Python never decodes a
// trace: every record, fingerprint and verdict comes from the code the CLI runs.
#pragma once

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>

namespace lockstep::python {

namespace py = pybind11;

void bind_run(py::module_& m);   // run.cpp: open_run, TraceFile, Record, Buffer
void bind_diff(py::module_& m);  // diff.cpp: diff, verify

// A JSON value as the Python object json.loads makes of it.
py::object to_python(const nlohmann::json& value);

}  // namespace lockstep::python
