// collectors/python_frames.cpp in an embedded CPython: the frames of the Python code that called
// into native code, read through the C API the shim finds with dlsym, with the GIL held, with
// it released (as PyTorch's ops release it before they launch), and on a thread that never ran
// Python (autograd's backward threads): none there.
#include <Python.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "collectors/python_frames.h"

namespace lockstep::collectors {
namespace {

std::vector<std::string> g_held, g_released, g_other_thread;

// probe.capture(): what a kernel launch inside a Python op would record.
PyObject* capture(PyObject*, PyObject*) {
  g_held = python_frames(8);
  Py_BEGIN_ALLOW_THREADS;
  g_released = python_frames(8);
  std::thread([] { g_other_thread = python_frames(8); }).join();
  Py_END_ALLOW_THREADS;
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {{"capture", capture, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "probe", nullptr, -1, kMethods};
PyObject* init_probe() { return PyModule_Create(&kModule); }

TEST(PythonFrames, TheFramesOfThePythonCallerAreReadWithOrWithoutTheGil) {
  EXPECT_TRUE(python_frames(8).empty()) << "no interpreter yet";
  PyImport_AppendInittab("probe", init_probe);
  Py_Initialize();
  const char* code =
      "import probe\n"
      "class Block:\n"
      "    def forward(self):\n"
      "        probe.capture()\n"
      "def train():\n"
      "    Block().forward()\n"
      "train()\n";
  ASSERT_EQ(PyRun_SimpleStringFlags(code, nullptr), 0);
  Py_FinalizeEx();
  for (const auto* frames : {&g_held, &g_released}) {
    ASSERT_EQ(frames->size(), 3u);
    EXPECT_EQ((*frames)[0], "<string>:4 in Block.forward");
    EXPECT_EQ((*frames)[1], "<string>:6 in train");
    EXPECT_EQ((*frames)[2], "<string>:7 in <module>");
  }
  EXPECT_TRUE(g_other_thread.empty()) << g_other_thread.front();
  EXPECT_TRUE(python_frames(8).empty()) << "interpreter finalised";
}

}  // namespace
}  // namespace lockstep::collectors
