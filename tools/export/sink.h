// Where `lockstep export` writes its events: Chrome trace-event JSON or Perfetto's protobuf trace.
// The command decides what each event says (export.cpp); a sink only encodes it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lockstep::tools::exporting {

struct Arg {
  std::string key;
  std::variant<std::string, uint64_t, int64_t, bool> value;
};

// One record: a slice of one time unit on its rank's stream track (an instant for a step
// marker). Time is the record's seq: records carry no clock.
struct Event {
  int rank = 0;
  uint32_t stream = 0;
  uint64_t seq = 0;
  // A scope's slice (the ranges open on a thread: a module's forward) goes on its thread's scope
  // track (scope_track), `length` time units from seq, at nesting `depth` (0 outermost): the
  // sinks start a deeper slice later and end it earlier by a nanosecond per level, so that a
  // parent always encloses its children whatever order a reader sorts equal times in.
  std::optional<uint32_t> scope_thread;
  uint64_t length = 1;
  uint32_t depth = 0;
  bool instant = false;
  std::string name;      // "[origin] kernel_name" for a divergent op
  std::string category;  // the record kind ("kernel", "gemm")
  bool divergent = false;
  bool receiver = false;  // divergent as a receiver (else origin, structural or metric)
  std::vector<Arg> args;
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void rank(int rank) = 0;  // before the rank's events
  virtual void stream(int rank, uint32_t stream) = 0;  // before the stream's first event
  // Before the first scope slice of a thread: its track, "thread N scopes", under the rank.
  virtual void scope_track(int rank, uint32_t thread) = 0;
  virtual void event(const Event& event) = 0;
  virtual void finish() = 0;  // ends the file's structure (then the caller closes it)
  virtual uint64_t bytes() const = 0;  // written so far
};

// Trace-event JSON (ui.perfetto.dev and chrome://tracing): one process per rank, one thread per
// stream, "X" events of 1 us at ts = seq.
std::unique_ptr<Sink> json_sink(FILE* out);
// Perfetto's protobuf trace (tools/export/perfetto_trace.proto): a process track per rank, a
// child track per stream, TrackEvent slices begin/end at seq us, names and keys interned.
std::unique_ptr<Sink> proto_sink(FILE* out);

}  // namespace lockstep::tools::exporting
