// The module itself: the error translation and the parts (run.cpp, diff.cpp).
#include <exception>
#include <string>

#include "python/src/core.h"
#include "tools/launch.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::python {

py::object to_python(const nlohmann::json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

namespace {

// The Python classes live in lockstep/_errors.py (one home, importable without this module);
// the C++ errors become them with their one-line message, "FILE: problem".
void raise_as(const char* class_name, const std::exception& e) {
  py::object cls = py::module_::import("lockstep._errors").attr(class_name);
  PyErr_SetString(cls.ptr(), e.what());
}

}  // namespace

}  // namespace lockstep::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using lockstep::python::raise_as;
  m.doc() = "lockstep's C++ trace reader and diff (use the lockstep package, not this module)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lockstep::trace::TraceError& e) {
      raise_as("TraceError", e);
    } catch (const lockstep::tools::InputError& e) {
      raise_as("InputError", e);
    }
  });
  m.def(
      "parse_steps",
      [](const std::string& text) {
        uint32_t first = 0, last = 0;
        lockstep::tools::parse_step_range(text, "steps", first, last);
        return py::make_tuple(first, last);
      },
      py::arg("text"), "'A-B', 'A-' or 'A' as (first, last), inclusive; the CLI's parser");
  lockstep::python::bind_run(m);
  lockstep::python::bind_diff(m);
}
