#include "tools/op_stack.h"

#include <exception>
#include <memory>

#include "tools/record_text.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::tools {
namespace {

OpStack parse(const std::vector<uint8_t>& payload) {
  OpStack stack;
  const std::string text(payload.begin(), payload.end());
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.starts_with("py ")) stack.python.push_back(line.substr(3));
    if (line.starts_with("native ")) stack.native.push_back(line.substr(7));
    at = end + 1;
  }
  return stack;
}

// Calls fn(reader-owned record) for the records of one step of one rank, in seq order; false
// when the run or rank cannot be read.
template <typename Fn>
bool for_each_in_step(const RunSet& run, int rank, uint32_t step, Fn fn) {
  try {
    const RankFile* file = run.find(rank);
    if (file == nullptr) return false;
    std::unique_ptr<trace::TraceReader> reader = file->open();
    for_each_record_in_seq_order(*reader, step, step, [&](const trace::Record& r) {
      return fn(r, *reader);
    });
    return true;
  } catch (const std::exception&) {
    return false;  // a report without the stack, rather than none
  }
}

template <typename Fn>
bool for_each_in_step(const std::string& dir, int rank, uint32_t step, Fn fn) {
  try {
    return for_each_in_step(open_run_set(dir, OpenOptions{}), rank, step, fn);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::optional<OpStack> stack_of_op(const std::string& dir, int rank, uint32_t step, uint64_t seq) {
  try {
    return stack_of_op(open_run_set(dir, OpenOptions{}), rank, step, seq);
  } catch (const std::exception&) {
    return std::nullopt;  // a report without the stack, rather than none
  }
}

std::optional<OpStack> stack_of_op(const RunSet& run, int rank, uint32_t step, uint64_t seq) {
  std::optional<OpStack> found;
  for_each_in_step(run, rank, step, [&](const trace::Record& r, trace::TraceReader&) {
    if (r.kind == trace::RecordKind::Stack && r.fields[trace::fields::Stack::op_seq] == seq)
      found = parse(r.payload);
    return !found;
  });
  return found;
}

std::optional<OpStack> stack_of_kernel(const std::string& dir, int rank, uint32_t step,
                                       uint32_t stream, const std::string& name,
                                       uint32_t occurrence) {
  uint64_t seq = 0;
  uint32_t seen = 0;
  std::optional<OpStack> found;
  for_each_in_step(dir, rank, step, [&](const trace::Record& r, trace::TraceReader& reader) {
    if (seq == 0 && r.kind == trace::RecordKind::Kernel && r.stream == stream &&
        reader.string(r.name) == name && ++seen == occurrence)
      seq = r.seq;
    // A Stack record follows its launch's record in seq order.
    if (seq != 0 && r.kind == trace::RecordKind::Stack &&
        r.fields[trace::fields::Stack::op_seq] == seq)
      found = parse(r.payload);
    return !found;
  });
  return found;
}

std::vector<std::string> job_frames(const std::vector<std::string>& python) {
  auto library = [](const std::string& frame) {
    return frame.find("/site-packages/") != std::string::npos ||
           frame.find("/dist-packages/") != std::string::npos ||
           frame.find("/lib/python3") != std::string::npos || frame.starts_with("<frozen");
  };
  std::vector<std::string> own;
  for (const std::string& frame : python)
    if (!library(frame)) own.push_back(frame);
  return own.empty() ? python : own;
}

std::string exact_regex(const std::string& text) {
  std::string out = "^";
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out + "$";
}

}  // namespace lockstep::tools
