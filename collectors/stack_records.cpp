#include "collectors/stack_records.h"

#include <string>
#include <vector>

#include "collectors/events.h"
#include "collectors/native_frames.h"
#include "collectors/python_frames.h"
#include "collectors/runtime.h"

namespace lockstep::collectors {

namespace {
constexpr size_t kMaxPythonFrames = 32;
constexpr size_t kMaxNativeFrames = 24;
}  // namespace

void record_stack(Tracer* tracer, const trace::Record& op, CUstream stream, bool per_thread) {
  if (!tracer->fingerprint_step(op.step)) return;
  // Reading frames calls into CPython (which may free objects whose finalisers reach CUDA):
  // whatever it calls passes through the hooks untraced.
  ShimCallGuard guard;
  const std::vector<std::string> python = python_frames(kMaxPythonFrames);
  const std::vector<std::string> native = native_frames(kMaxNativeFrames);
  std::string text;
  for (const std::string& frame : python) text += "py " + frame + "\n";
  for (const std::string& frame : native) text += "native " + frame + "\n";
  trace::Record record;
  const std::string name = python.empty() ? "(no Python frames)" : python.front();
  tracer->stamp(&record, trace::RecordKind::Stack, name, stream, per_thread);
  record.step = op.step;  // the launch's step, even if a marker moved it meanwhile
  record.fields[trace::fields::Stack::op_seq] = op.seq;
  record.fields[trace::fields::Stack::python_frames] = python.size();
  record.fields[trace::fields::Stack::native_frames] = native.size();
  record.payload.assign(text.begin(), text.end());
  tracer->append(record);
}

}  // namespace lockstep::collectors
