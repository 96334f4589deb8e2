// lockstep._state_hook: the PyTorch state hook's steady step in C (python/lockstep/_torch_hooks.py,
// StateHook). After every optimizer step the hook checks that the optimizer's parameters are the
// ones its call was prepared for, at the same pointers, and sends the prepared call to the shim
// (lockstep_fingerprint_many). In Python that step cost a launch-bound PyTorch job on the H200's
// host 65-75 us a step, run cold after the job's work (issue #34): three frames, their bytecode
// and ctypes' call (libffi's converters, code the job never runs otherwise). Here it is one C call
// from torch's hook loop: the checks, torch's own data_ptr per parameter, the stream, and the
// shim's function called directly; torch's capture check only once the shim saw a capture begin
// (lockstep_capture_begun).
//
// Anything that is not that steady step (another optimizer, a parameter added, moved or gone, an
// error raised by any call) goes to the Python hook, unchanged (`slow`), which prepares the call
// again and primes this object with it (prime()): the rules live there, this only repeats a call
// whose every input it has seen unchanged. Built against the stable ABI (Py_LIMITED_API, an
// .abi3.so): one build imports in every CPython from 3.8 on, the job's, whatever its minor
// version. Without it (not built, or no shim in the process) the Python hook does every step.
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03080000
#include <Python.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <vector>

#include "collectors/lockstep.h"  // LOCKSTEP_SAME_NAMES

namespace {

using FingerprintMany = void (*)(unsigned long long n, const void* const* ptrs,
                                 const unsigned long long* bytes, const char* const* names,
                                 void* stream, int kind);
// collectors/lockstep.h's, found in the process's global scope (the shim is preloaded), or null.
FingerprintMany g_fingerprint_many = nullptr;
// lockstep_capture_begun: before the process's first capture no stream captures, and torch's
// check (a runtime call, cold once a step) is not asked. Null with an older shim: always asked.
using CaptureBegun = int (*)();
CaptureBegun g_capture_begun = nullptr;
PyObject* g_params_key = nullptr;  // "params", a param group's key
// "param_groups", interned once: PyObject_GetAttrString makes and hashes a new string per call.
PyObject* g_param_groups_name = nullptr;

// One prepared lockstep_fingerprint_many call: its arrays belong to a lockstep._shim.Batch that
// `keep` holds alive.
struct Call {
  unsigned long long n = 0;
  const void* const* ptrs = nullptr;
  const unsigned long long* sizes = nullptr;
  const char* const* names = nullptr;
  int kind = 0;
  PyObject* current_stream = nullptr;  // borrowed from `keep`: no argument, answers the handle
  void* stream = nullptr;
};

struct SteadyStep {
  PyObject_HEAD
  PyObject* slow;       // the Python hook: every call that is not the steady step
  PyObject* capturing;  // no argument: true while the current stream captures a CUDA graph
  // Set by prime(), null before and after unprime():
  PyObject* optimizer;  // a weak reference to the optimizer the call was prepared for
  PyObject* params;     // the tuple of its parameters, in param_groups' order
  PyObject* pointer;    // reads one parameter's pointer (torch's TensorBase.data_ptr)
  PyObject* keep;       // what the calls' arrays and functions belong to
  std::vector<unsigned long long>* pointers;  // every parameter's pointer when prepared
  std::vector<Call>* calls;
  // LOCKSTEP_DEBUG: the steady calls' count and time (the Python hook counts its own), and
  // that time by part (Part): where a cold step goes.
  int timed;
  unsigned long long steady_calls, steady_ns;
  unsigned long long part_ns[4];
};
// The steady step's parts, in order: torch's capture check, the optimizer and its parameters'
// identity, their pointers, the streams and the shim's call (its own time is the shim's "state").
enum Part { kCapture, kParams, kPointers, kSend };

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

void clear_prepared(SteadyStep* self) {
  Py_CLEAR(self->optimizer);
  Py_CLEAR(self->params);
  Py_CLEAR(self->pointer);
  Py_CLEAR(self->keep);
  self->pointers->clear();
  self->calls->clear();
}

// True when `optimizer`'s parameters are the prepared ones at the prepared pointers; false (with
// no Python error left set) for anything else.
// Under LOCKSTEP_DEBUG, adds the time since *mark to `part` and moves the mark.
void lap(SteadyStep* self, Part part, uint64_t* mark) {
  if (!self->timed) return;
  const uint64_t now = now_ns();
  self->part_ns[part] += now - *mark;
  *mark = now;
}

bool unchanged(SteadyStep* self, PyObject* optimizer, uint64_t* mark) {
  PyObject* live = PyObject_CallObject(self->optimizer, nullptr);  // the weak reference's object
  if (live == nullptr) return false;
  const bool same_optimizer = live == optimizer;
  Py_DECREF(live);
  if (!same_optimizer) return false;
  PyObject* groups = PyObject_GetAttr(optimizer, g_param_groups_name);
  if (groups == nullptr) return false;
  const Py_ssize_t n = PyTuple_Size(self->params);
  Py_ssize_t k = 0;
  bool same = PyList_Check(groups);
  const Py_ssize_t group_count = same ? PyList_Size(groups) : 0;
  for (Py_ssize_t g = 0; same && g < group_count; ++g) {
    PyObject* group = PyList_GetItem(groups, g);
    PyObject* list = group != nullptr && PyDict_Check(group) ? PyDict_GetItem(group, g_params_key)
                                                             : nullptr;
    if (list == nullptr || !PyList_Check(list)) {
      same = false;
      break;
    }
    const Py_ssize_t size = PyList_Size(list);
    for (Py_ssize_t i = 0; i < size; ++i, ++k) {
      if (k >= n || PyList_GetItem(list, i) != PyTuple_GetItem(self->params, k)) {
        same = false;
        break;
      }
    }
  }
  Py_DECREF(groups);
  lap(self, kParams, mark);
  if (!same || k != n) return false;
  const std::vector<unsigned long long>& pointers = *self->pointers;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* value =
        PyObject_CallFunctionObjArgs(self->pointer, PyTuple_GetItem(self->params, i), nullptr);
    if (value == nullptr) return false;
    const unsigned long long pointer = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    if (pointer != pointers[size_t(i)]) return false;  // an error reads as (unsigned)-1
  }
  lap(self, kPointers, mark);
  return true;
}

// 1: the step is done (sent, or a capture: nothing to send); 0: the Python hook's.
int steady_step(SteadyStep* self, PyObject* optimizer, uint64_t start) {
  uint64_t mark = start;
  if (g_capture_begun == nullptr || g_capture_begun() != 0) {
    PyObject* capture = PyObject_CallObject(self->capturing, nullptr);
    if (capture == nullptr) return 0;
    const int capturing = PyObject_IsTrue(capture);
    Py_DECREF(capture);
    if (capturing < 0) return 0;
    if (capturing) return 1;  // nothing runs now, and a graph's replays run no hook
  }
  lap(self, kCapture, &mark);
  if (!unchanged(self, optimizer, &mark)) return 0;
  // Every stream before the first call: a failure after it would send a call twice.
  for (Call& call : *self->calls) {
    PyObject* stream = PyObject_CallObject(call.current_stream, nullptr);
    if (stream == nullptr) return 0;
    call.stream = PyLong_AsVoidPtr(stream);
    Py_DECREF(stream);
    if (PyErr_Occurred()) return 0;
  }
  // Each call's arrays are its Batch's, unchanged while prepared (`keep`), and a Batch anew
  // comes through the Python hook's call first: the shim need not read the names again
  // (lockstep.h, LOCKSTEP_SAME_NAMES; this module is built with the shim it runs under).
  for (const Call& call : *self->calls)
    g_fingerprint_many(call.n, call.ptrs, call.sizes, call.names, call.stream,
                       call.kind | LOCKSTEP_SAME_NAMES);
  lap(self, kSend, &mark);
  return 1;
}

PyObject* steady_call(PyObject* object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<SteadyStep*>(object);
  PyObject* optimizer = PyTuple_Size(args) > 0 ? PyTuple_GetItem(args, 0) : nullptr;
  if (self->optimizer != nullptr && optimizer != nullptr) {
    const uint64_t start = self->timed ? now_ns() : 0;
    if (steady_step(self, optimizer, start)) {
      if (self->timed) self->steady_calls += 1, self->steady_ns += now_ns() - start;
      Py_RETURN_NONE;
    }
    PyErr_Clear();  // the Python hook meets the same error, and says so once
  }
  return PyObject_Call(self->slow, args, kwargs);
}

// SteadyStep(slow, capturing, timed)
PyObject* steady_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *slow, *capturing;
  int timed = 0;
  if (!PyArg_ParseTuple(args, "OOp", &slow, &capturing, &timed)) return nullptr;
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* self = reinterpret_cast<SteadyStep*>(alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(slow), Py_INCREF(capturing);
  self->slow = slow, self->capturing = capturing;
  self->optimizer = self->params = self->pointer = self->keep = nullptr;
  self->pointers = new std::vector<unsigned long long>;
  self->calls = new std::vector<Call>;
  self->timed = timed;
  self->steady_calls = self->steady_ns = 0;
  for (unsigned long long& ns : self->part_ns) ns = 0;
  return reinterpret_cast<PyObject*>(self);
}

void steady_dealloc(PyObject* object) {
  auto* self = reinterpret_cast<SteadyStep*>(object);
  clear_prepared(self);
  delete self->pointers;
  delete self->calls;
  Py_CLEAR(self->slow);
  Py_CLEAR(self->capturing);
  PyTypeObject* type = Py_TYPE(object);
  auto free_fn = reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free));
  free_fn(object);
  Py_DECREF(type);
}

// prime(optimizer_ref, params, pointers, pointer, calls, keep): `calls` a list of (n, ptrs
// address, sizes address, names address, kind, current_stream).
PyObject* steady_prime(PyObject* object, PyObject* args) {
  auto* self = reinterpret_cast<SteadyStep*>(object);
  PyObject *optimizer, *params, *pointers, *pointer, *calls, *keep;
  if (!PyArg_ParseTuple(args, "OO!O!OO!O", &optimizer, &PyTuple_Type, &params, &PyTuple_Type,
                        &pointers, &pointer, &PyList_Type, &calls, &keep))
    return nullptr;
  clear_prepared(self);
  if (PyTuple_Size(pointers) != PyTuple_Size(params)) {
    PyErr_SetString(PyExc_ValueError, "one pointer per parameter");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_Size(pointers); ++i) {
    const unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GetItem(pointers, i));
    if (PyErr_Occurred()) return self->pointers->clear(), nullptr;
    self->pointers->push_back(p);
  }
  for (Py_ssize_t i = 0; i < PyList_Size(calls); ++i) {
    Call call;
    unsigned long long ptrs, sizes, names;
    PyObject* current_stream;
    if (!PyArg_ParseTuple(PyList_GetItem(calls, i), "KKKKiO", &call.n, &ptrs, &sizes, &names,
                          &call.kind, &current_stream)) {
      self->pointers->clear(), self->calls->clear();
      return nullptr;
    }
    call.ptrs = reinterpret_cast<const void* const*>(uintptr_t(ptrs));
    call.sizes = reinterpret_cast<const unsigned long long*>(uintptr_t(sizes));
    call.names = reinterpret_cast<const char* const*>(uintptr_t(names));
    call.current_stream = current_stream;  // borrowed: `calls` is kept below
    self->calls->push_back(call);
  }
  // The calls' current_stream functions are borrowed from `calls`: kept with `keep`.
  self->keep = Py_BuildValue("(OO)", keep, calls);
  if (self->keep == nullptr) return self->pointers->clear(), self->calls->clear(), nullptr;
  Py_INCREF(optimizer), Py_INCREF(params), Py_INCREF(pointer);
  self->optimizer = optimizer, self->params = params, self->pointer = pointer;
  Py_RETURN_NONE;
}

PyObject* steady_unprime(PyObject* object, PyObject*) {
  clear_prepared(reinterpret_cast<SteadyStep*>(object));
  Py_RETURN_NONE;
}

PyObject* steady_times(PyObject* object, PyObject*) {
  auto* self = reinterpret_cast<SteadyStep*>(object);
  return Py_BuildValue("(KK(KKKK))", self->steady_calls, self->steady_ns, self->part_ns[kCapture],
                       self->part_ns[kParams], self->part_ns[kPointers], self->part_ns[kSend]);
}

PyObject* steady_primed(PyObject* object, PyObject*) {
  return PyBool_FromLong(reinterpret_cast<SteadyStep*>(object)->optimizer != nullptr);
}

PyMethodDef steady_methods[] = {
    {"prime", steady_prime, METH_VARARGS,
     "prime(optimizer_ref, params, pointers, pointer, calls, keep): the step to repeat"},
    {"unprime", steady_unprime, METH_NOARGS, "every call goes to the Python hook"},
    {"times", steady_times, METH_NOARGS, "(steady calls, their ns, (capture, params, pointers, send ns)) under LOCKSTEP_DEBUG"},
    {"primed", steady_primed, METH_NOARGS, "whether a step is prepared"},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot steady_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(steady_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(steady_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(steady_call)},
    {Py_tp_methods, steady_methods},
    {Py_tp_doc, const_cast<char*>("SteadyStep(slow, capturing, timed): the state hook's steady "
                                  "step in C (python/src/state_hook.cpp)")},
    {0, nullptr}};

PyType_Spec steady_spec = {"lockstep._state_hook.SteadyStep", sizeof(SteadyStep), 0,
                           Py_TPFLAGS_DEFAULT, steady_slots};

PyObject* available(PyObject*, PyObject*) { return PyBool_FromLong(g_fingerprint_many != nullptr); }

PyMethodDef module_methods[] = {
    {"available", available, METH_NOARGS,
     "whether the shim's lockstep_fingerprint_many is in the process"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_state_hook",
                          "The PyTorch state hook's steady step in C (python/src/state_hook.cpp)",
                          -1, module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__state_hook() {
  g_fingerprint_many =
      reinterpret_cast<FingerprintMany>(dlsym(RTLD_DEFAULT, "lockstep_fingerprint_many"));
  g_capture_begun = reinterpret_cast<CaptureBegun>(dlsym(RTLD_DEFAULT, "lockstep_capture_begun"));
  if (g_params_key == nullptr) g_params_key = PyUnicode_InternFromString("params");
  if (g_params_key == nullptr) return nullptr;
  if (g_param_groups_name == nullptr)
    g_param_groups_name = PyUnicode_InternFromString("param_groups");
  if (g_param_groups_name == nullptr) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&steady_spec);
  if (type == nullptr || PyModule_AddObject(module, "SteadyStep", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
