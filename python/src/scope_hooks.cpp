// lockstep._scope_hooks: the module scopes' hooks in C (python/lockstep/_module_scopes.py, whose
// ModuleScopes is the reference: the same scopes, pushed and popped in the same order).
//
// Why: at level full the scopes are on, and in Python they cost the unseen job ~10% of its
// untraced step (5.4-5.8 ms a step on an H100 host; a module's two forward hooks 8.2 us in
// Python, 4.1 here, bench/overhead/scope_parts.py): two Python hook bodies per
// module call, a lambda and a set_backward frame with two ctypes calls per autograd node hook in
// the backward, all cold after the job's own Python. Here a module call's hooks are one thin
// Python frame each (the check that dynamo is not tracing: dynamo must see Python there, or a C
// call would break its graph) and C from then on; an autograd node's hook is a C callable, so the
// backward runs no Python frame of ours at all, and an input hook that a module's output hook
// replaces is retargeted, not removed and registered again.
//
// State, per thread as ModuleScopes keeps it: the stack of open forward scopes (a module and
// whether it pushed) and the backward scope set on the thread. Names: a module's
// (name, "<name> (forward)", "<name> (backward)") bytes in its __dict__ under _lockstep_scope,
// made by ModuleScopes.name_of (the rules of naming live there). Any error stops the scopes:
// ModuleScopes.fail says so once, and the job goes on.
//
// Built against the stable ABI (Py_LIMITED_API, an .abi3.so), as state_hook.cpp is.
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03080000
#include <Python.h>
#include <dlfcn.h>

#include <vector>

namespace {

using ScopePush = void (*)(const char*);
using ScopePop = void (*)();
ScopePush g_push = nullptr;  // collectors/lockstep.h's, found in the process (the shim preloaded)
ScopePop g_pop = nullptr;

PyObject* g_key = nullptr;          // "_lockstep_scope": a module's names, a node's hook
PyObject* g_grad_fn = nullptr;      // "grad_fn"
PyObject* g_metadata = nullptr;     // "metadata"
PyObject* g_register = nullptr;     // "register_prehook"
PyObject* g_name_of = nullptr;      // ModuleScopes.name_of: module -> its names tuple
PyObject* g_fail = nullptr;         // ModuleScopes.fail(error)
PyObject* g_hook_type = nullptr;    // BackwardScope
bool g_failed = false;

struct Frame {
  PyObject* names;  // strong: the module's names tuple
  bool pushed;      // false: the module has its parent's name (a wrapper) and added no level
};
// Per thread, never freed: a thread's frames outlive nothing but the thread (as threading.local's).
thread_local std::vector<Frame>* t_stack = nullptr;
thread_local PyObject* t_backward = nullptr;  // strong: the backward scope set on this thread

std::vector<Frame>& stack() {
  if (t_stack == nullptr) t_stack = new std::vector<Frame>;
  return *t_stack;
}

// An error is set: stop the scopes, hand the error to ModuleScopes.fail (once), return None.
PyObject* stop_with_error() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  const bool first = !g_failed;
  g_failed = true;
  if (first && g_fail != nullptr && value != nullptr) {
    PyObject* result = PyObject_CallFunctionObjArgs(g_fail, value, nullptr);
    Py_XDECREF(result);
    PyErr_Clear();
  }
  Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(traceback);
  Py_RETURN_NONE;
}

// ModuleScopes.set_backward: the thread's backward scope becomes `scope` (bytes, or None for
// none); nothing sent when it is that already. False with an error set.
bool set_backward(PyObject* scope) {
  if (scope == Py_None) scope = nullptr;
  PyObject* current = t_backward;
  if (current == scope) return true;
  if (current != nullptr && scope != nullptr) {
    const int same = PyObject_RichCompareBool(current, scope, Py_EQ);
    if (same < 0) return false;
    if (same) return true;
  }
  const char* name = nullptr;
  if (scope != nullptr && (name = PyBytes_AsString(scope)) == nullptr) return false;
  if (current != nullptr) g_pop();
  if (name != nullptr) g_push(name);
  Py_XINCREF(scope);
  t_backward = scope;
  Py_XDECREF(current);
  return true;
}

// ---- BackwardScope: an autograd node's pre-hook ------------------------------------------------
struct BackwardScope {
  PyObject_HEAD
  PyObject* scope;  // bytes or None
  int output;       // a module's output hook (an inner module's output hook is never replaced)
};

PyObject* hook_call(PyObject* object, PyObject*, PyObject*) {
  if (!g_failed && !set_backward(reinterpret_cast<BackwardScope*>(object)->scope))
    return stop_with_error();
  Py_RETURN_NONE;  // the gradients unchanged
}

PyObject* make_hook(PyObject* scope, int output) {
  auto* type = reinterpret_cast<PyTypeObject*>(g_hook_type);
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* hook = reinterpret_cast<BackwardScope*>(alloc(type, 0));
  if (hook == nullptr) return nullptr;
  Py_INCREF(scope);
  hook->scope = scope;
  hook->output = output;
  return reinterpret_cast<PyObject*>(hook);
}

void hook_dealloc(PyObject* object) {
  Py_CLEAR(reinterpret_cast<BackwardScope*>(object)->scope);
  PyTypeObject* type = Py_TYPE(object);
  auto free_fn = reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free));
  free_fn(object);
  Py_DECREF(type);
}

PyObject* hook_scope(PyObject* object, void*) {
  PyObject* scope = reinterpret_cast<BackwardScope*>(object)->scope;
  Py_INCREF(scope);
  return scope;
}

PyGetSetDef hook_getset[] = {{"scope", hook_scope, nullptr, "the backward scope it sets", nullptr},
                             {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot hook_slots[] = {
    {Py_tp_call, reinterpret_cast<void*>(hook_call)},
    {Py_tp_dealloc, reinterpret_cast<void*>(hook_dealloc)},
    {Py_tp_getset, hook_getset},
    {Py_tp_doc, const_cast<char*>("an autograd node's pre-hook: sets the thread's backward scope "
                                  "(python/src/scope_hooks.cpp)")},
    {0, nullptr}};

PyType_Spec hook_spec = {"lockstep._scope_hooks.BackwardScope", sizeof(BackwardScope), 0,
                         Py_TPFLAGS_DEFAULT, hook_slots};

// ModuleScopes.on_node: `node`'s pre-hook sets the backward scope to `scope` (bytes or None):
// for a module's output (output) unless an inner module's output hook is there already,
// replacing an input hook; for a module's input only on a node with no hook yet.
bool on_node(PyObject* node, PyObject* scope, int output) {
  if (node == Py_None) return true;
  PyObject* metadata = PyObject_GetAttr(node, g_metadata);
  if (metadata == nullptr) return false;
  bool ok = false;
  if (!PyDict_Check(metadata)) {
    PyErr_SetString(PyExc_TypeError, "an autograd node's metadata is not a dict");
  } else if (PyObject* held = PyDict_GetItemWithError(metadata, g_key); held != nullptr) {
    ok = true;  // borrowed
    if (output && Py_TYPE(held) == reinterpret_cast<PyTypeObject*>(g_hook_type)) {
      auto* hook = reinterpret_cast<BackwardScope*>(held);
      if (!hook->output) {  // an input hook: now the output hook of this module
        PyObject* old = hook->scope;
        Py_INCREF(scope);
        hook->scope = scope;
        hook->output = 1;
        Py_DECREF(old);
      }
    }
  } else if (!PyErr_Occurred()) {
    PyObject* hook = make_hook(scope, output);
    if (hook != nullptr) {
      PyObject* handle = PyObject_CallMethodObjArgs(node, g_register, hook, nullptr);
      ok = handle != nullptr && PyDict_SetItem(metadata, g_key, hook) == 0;
      Py_XDECREF(handle);  // never removed: an input hook is retargeted instead
      Py_DECREF(hook);
    }
  }
  Py_DECREF(metadata);
  return ok;
}

// One item a module takes or returns: its node hooked when it has one (a grad_fn attribute, as
// ModuleScopes' hasattr; the plain values that cannot have one are passed over without asking).
bool on_item(PyObject* item, PyObject* scope, int output) {
  if (item == Py_None || PyLong_Check(item) || PyFloat_Check(item) || PyUnicode_Check(item) ||
      PyBytes_Check(item))
    return true;
  PyObject* node = PyObject_GetAttr(item, g_grad_fn);
  if (node == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
    PyErr_Clear();
    return true;
  }
  const bool ok = on_node(node, scope, output);
  Py_DECREF(node);
  return ok;
}

// ModuleScopes' _tensors: the value itself, or the items of a tuple, a list or a dict.
bool on_tensors(PyObject* value, PyObject* scope, int output) {
  if (PyTuple_Check(value)) {
    for (Py_ssize_t i = 0, n = PyTuple_Size(value); i < n; ++i)
      if (!on_item(PyTuple_GetItem(value, i), scope, output)) return false;
    return true;
  }
  if (PyList_Check(value)) {
    for (Py_ssize_t i = 0; i < PyList_Size(value); ++i) {
      PyObject* item = PyList_GetItem(value, i);
      Py_INCREF(item);  // a hook may run Python that changes the list
      const bool ok = on_item(item, scope, output);
      Py_DECREF(item);
      if (!ok) return false;
    }
    return true;
  }
  if (PyDict_Check(value)) {
    PyObject* values = PyDict_Values(value);
    if (values == nullptr) return false;
    const bool ok = on_tensors(values, scope, output);
    Py_DECREF(values);
    return ok;
  }
  return on_item(value, scope, output);
}

// The module's names tuple (new reference), made by ModuleScopes.name_of on first sight.
PyObject* names_of(PyObject* module) {
  PyObject* names = PyObject_GetAttr(module, g_key);
  if (names == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
    names = PyObject_CallFunctionObjArgs(g_name_of, module, nullptr);
    if (names == nullptr) return nullptr;
  }
  if (!PyTuple_Check(names) || PyTuple_Size(names) != 3) {
    Py_DECREF(names);
    PyErr_SetString(PyExc_TypeError, "a module's scope names are not a (name, forward, "
                                     "backward) tuple");
    return nullptr;
  }
  return names;
}

// forward_pre(module, args): the global forward pre-hook's work after dynamo's check.
PyObject* forward_pre(PyObject*, PyObject* call_args) {
  PyObject *module, *args;
  if (g_failed) Py_RETURN_NONE;
  if (!PyArg_UnpackTuple(call_args, "forward_pre", 2, 2, &module, &args)) return stop_with_error();
  std::vector<Frame>& frames = stack();
  if (frames.empty() && !set_backward(Py_None))  // a backward scope left on this thread
    return stop_with_error();
  PyObject* names = names_of(module);
  if (names == nullptr) return stop_with_error();
  bool pushed = true;
  if (!frames.empty()) {
    const int same = PyObject_RichCompareBool(PyTuple_GetItem(frames.back().names, 0),
                                              PyTuple_GetItem(names, 0), Py_EQ);
    if (same < 0) return Py_DECREF(names), stop_with_error();
    pushed = !same;
  }
  const char* forward = nullptr;
  if (pushed && (forward = PyBytes_AsString(PyTuple_GetItem(names, 1))) == nullptr)
    return Py_DECREF(names), stop_with_error();
  if (forward != nullptr) g_push(forward);
  PyObject* parent = frames.empty() ? Py_None : PyTuple_GetItem(frames.back().names, 2);
  Py_INCREF(parent);  // its tuple stays on the stack, but a hook may run Python
  frames.push_back({names, pushed});
  const bool ok = on_tensors(args, parent, 0);
  Py_DECREF(parent);
  if (!ok) return stop_with_error();
  Py_RETURN_NONE;
}

// forward_post(module, args, output).
PyObject* forward_post(PyObject*, PyObject* call_args) {
  PyObject *module, *args, *output;
  if (g_failed) Py_RETURN_NONE;
  if (!PyArg_UnpackTuple(call_args, "forward_post", 3, 3, &module, &args, &output))
    return stop_with_error();  // never the job's error
  std::vector<Frame>& frames = stack();
  if (frames.empty()) Py_RETURN_NONE;
  const Frame frame = frames.back();
  frames.pop_back();
  if (frame.pushed) g_pop();
  const bool ok = on_tensors(output, PyTuple_GetItem(frame.names, 2), 1);
  Py_DECREF(frame.names);
  if (!ok) return stop_with_error();
  Py_RETURN_NONE;
}

PyObject* set_backward_py(PyObject*, PyObject* scope) {
  if (!g_failed && !set_backward(scope)) return stop_with_error();
  Py_RETURN_NONE;
}

// init(name_of, fail): ModuleScopes' naming and failure.
PyObject* init(PyObject*, PyObject* args) {
  PyObject *name_of, *fail;
  if (!PyArg_ParseTuple(args, "OO", &name_of, &fail)) return nullptr;
  Py_INCREF(name_of), Py_INCREF(fail);
  Py_XDECREF(g_name_of), Py_XDECREF(g_fail);
  g_name_of = name_of, g_fail = fail;
  g_failed = false;
  Py_RETURN_NONE;
}

PyObject* stop(PyObject*, PyObject*) {
  g_failed = true;
  Py_RETURN_NONE;
}

PyObject* available(PyObject*, PyObject*) {
  return PyBool_FromLong(g_push != nullptr && g_pop != nullptr);
}

PyMethodDef module_methods[] = {
    {"available", available, METH_NOARGS,
     "whether the shim's lockstep_scope_push and lockstep_scope_pop are in the process"},
    {"init", init, METH_VARARGS, "init(name_of, fail)"},
    {"forward_pre", forward_pre, METH_VARARGS, "forward_pre(module, args)"},
    {"forward_post", forward_post, METH_VARARGS, "forward_post(module, args, output)"},
    {"set_backward", set_backward_py, METH_O, "set_backward(scope): bytes, or None for none"},
    {"stop", stop, METH_NOARGS, "no scope sent from now on (ModuleScopes.fail)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_scope_hooks",
                          "The module scopes' hooks in C (python/src/scope_hooks.cpp)", -1,
                          module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__scope_hooks() {
  g_push = reinterpret_cast<ScopePush>(dlsym(RTLD_DEFAULT, "lockstep_scope_push"));
  g_pop = reinterpret_cast<ScopePop>(dlsym(RTLD_DEFAULT, "lockstep_scope_pop"));
  for (auto [slot, text] : {std::pair{&g_key, "_lockstep_scope"}, {&g_grad_fn, "grad_fn"},
                            {&g_metadata, "metadata"}, {&g_register, "register_prehook"}}) {
    if (*slot == nullptr) *slot = PyUnicode_InternFromString(text);
    if (*slot == nullptr) return nullptr;
  }
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (g_hook_type == nullptr) g_hook_type = PyType_FromSpec(&hook_spec);
  if (g_hook_type == nullptr) return Py_DECREF(module), nullptr;
  Py_INCREF(g_hook_type);
  if (PyModule_AddObject(module, "BackwardScope", g_hook_type) < 0) {
    Py_DECREF(g_hook_type);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
