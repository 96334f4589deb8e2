#include "collectors/python_frames.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace lockstep::collectors {
namespace {

// CPython's stable C API, the functions this file needs (all in the limited API of 3.9+ but
// Py_IsFinalizing, public from 3.13, _Py_IsFinalizing before). Objects are opaque here.
struct PythonApi {
  int (*is_initialized)() = nullptr;         // Py_IsInitialized
  int (*is_finalizing)() = nullptr;          // Py_IsFinalizing / _Py_IsFinalizing (may be null)
  void* (*this_thread_state)() = nullptr;    // PyGILState_GetThisThreadState
  int (*ensure)() = nullptr;                 // PyGILState_Ensure
  void (*release)(int) = nullptr;            // PyGILState_Release
  void* (*thread_frame)(void*) = nullptr;    // PyThreadState_GetFrame: new reference
  void* (*frame_back)(void*) = nullptr;      // PyFrame_GetBack: new reference
  void* (*frame_code)(void*) = nullptr;      // PyFrame_GetCode: new reference
  int (*frame_line)(void*) = nullptr;        // PyFrame_GetLineNumber
  void* (*attribute)(void*, const char*) = nullptr;  // PyObject_GetAttrString: new reference
  const char* (*utf8)(void*) = nullptr;      // PyUnicode_AsUTF8: borrowed
  void (*dec_ref)(void*) = nullptr;          // Py_DecRef
  void (*clear_error)() = nullptr;           // PyErr_Clear

  bool usable() const {
    return is_initialized && this_thread_state && ensure && release && thread_frame &&
           frame_back && frame_code && frame_line && attribute && utf8 && dec_ref && clear_error;
  }
};

template <typename Fn>
void find(Fn* fn, const char* name) {
  *fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

const PythonApi& api() {
  static const PythonApi found = [] {
    PythonApi a;
    find(&a.is_initialized, "Py_IsInitialized");
    find(&a.is_finalizing, "Py_IsFinalizing");
    if (a.is_finalizing == nullptr) find(&a.is_finalizing, "_Py_IsFinalizing");
    find(&a.this_thread_state, "PyGILState_GetThisThreadState");
    find(&a.ensure, "PyGILState_Ensure");
    find(&a.release, "PyGILState_Release");
    find(&a.thread_frame, "PyThreadState_GetFrame");
    find(&a.frame_back, "PyFrame_GetBack");
    find(&a.frame_code, "PyFrame_GetCode");
    find(&a.frame_line, "PyFrame_GetLineNumber");
    find(&a.attribute, "PyObject_GetAttrString");
    find(&a.utf8, "PyUnicode_AsUTF8");
    find(&a.dec_ref, "Py_DecRef");
    find(&a.clear_error, "PyErr_Clear");
    return a;
  }();
  return found;
}

// A str attribute of a code object ("co_filename", "co_qualname"), or "" (cleared error).
std::string text_attribute(const PythonApi& py, void* object, const char* name) {
  void* value = py.attribute(object, name);
  if (value == nullptr) {
    py.clear_error();
    return {};
  }
  const char* text = py.utf8(value);
  std::string out = text != nullptr ? text : "";
  if (text == nullptr) py.clear_error();
  py.dec_ref(value);
  return out;
}

}  // namespace

std::vector<std::string> python_frames(size_t max) {
  std::vector<std::string> frames;
  const PythonApi& py = api();
  if (!py.usable() || max == 0 || !py.is_initialized()) return frames;
  if (py.is_finalizing != nullptr && py.is_finalizing()) return frames;
  // A thread that never ran Python has no thread state: Ensure would make one, with no frames.
  if (py.this_thread_state() == nullptr) return frames;
  const int gil = py.ensure();
  void* frame = py.thread_frame(py.this_thread_state());
  while (frame != nullptr && frames.size() < max) {
    void* code = py.frame_code(frame);
    std::string file, function;
    if (code != nullptr) {
      file = text_attribute(py, code, "co_filename");
      function = text_attribute(py, code, "co_qualname");  // 3.11+; co_name before
      if (function.empty()) function = text_attribute(py, code, "co_name");
      py.dec_ref(code);
    }
    frames.push_back(fmt::format("{}:{} in {}", file.empty() ? "?" : file, py.frame_line(frame),
                                 function.empty() ? "?" : function));
    void* back = py.frame_back(frame);
    py.dec_ref(frame);
    frame = back;
  }
  if (frame != nullptr) py.dec_ref(frame);
  py.release(gil);
  return frames;
}

}  // namespace lockstep::collectors
