// Chrome trace-event JSON, written an event at a time (nlohmann per event; the array by hand so
// that nothing is held in memory).
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "tools/export/sink.h"
#include "tools/json_text.h"

namespace lockstep::tools::exporting {
namespace {

class JsonSink : public Sink {
 public:
  explicit JsonSink(FILE* out) : out_(out) {
    write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  }

  void rank(int rank) override {
    emit({{"ph", "M"},
          {"pid", rank},
          {"name", "process_name"},
          {"args", {{"name", fmt::format("rank {}", rank)}}}});
    emit({{"ph", "M"}, {"pid", rank}, {"name", "process_sort_index"}, {"args", {{"sort_index", rank}}}});
  }

  void stream(int rank, uint32_t stream) override {
    emit({{"ph", "M"},
          {"pid", rank},
          {"tid", stream},
          {"name", "thread_name"},
          {"args", {{"name", stream ? fmt::format("stream {}", stream) : "no stream"}}}});
  }

  // Thread scope tracks get tids above every stream's.
  static uint64_t scope_tid(uint32_t thread) { return (uint64_t{1} << 32) + thread; }

  void scope_track(int rank, uint32_t thread) override {
    emit({{"ph", "M"},
          {"pid", rank},
          {"tid", scope_tid(thread)},
          {"name", "thread_name"},
          {"args", {{"name", fmt::format("thread {} scopes", thread)}}}});
  }

  void event(const Event& e) override {
    nlohmann::json args = nlohmann::json::object();
    for (const Arg& a : e.args) std::visit([&](const auto& v) { args[a.key] = v; }, a.value);
    // Microseconds, a nanosecond per nesting level inside the parent's (see Event).
    const double ts = static_cast<double>(e.seq) + e.depth * 0.001;
    nlohmann::json event = {{"ph", e.instant ? "i" : "X"},
                            {"pid", e.rank},
                            {"tid", e.scope_thread ? scope_tid(*e.scope_thread) : e.stream},
                            {"ts", e.depth ? nlohmann::json(ts) : nlohmann::json(e.seq)},
                            {"name", e.name},
                            {"cat", e.category},
                            {"args", std::move(args)}};
    if (e.instant)
      event["s"] = "p";
    else if (e.depth == 0)
      event["dur"] = e.length;
    else
      event["dur"] = static_cast<double>(e.length) - 2 * e.depth * 0.001;
    if (e.divergent) event["cname"] = e.receiver ? "bad" : "terrible";
    emit(event);
  }

  void finish() override { write("\n]}\n"); }
  uint64_t bytes() const override { return bytes_; }

 private:
  void emit(const nlohmann::json& event) {
    write(separator_);
    write(json_text(event));
    separator_ = ",\n";
  }
  void write(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), out_);
    bytes_ += text.size();
  }

  FILE* out_;
  uint64_t bytes_ = 0;
  const char* separator_ = "\n";
};

}  // namespace

std::unique_ptr<Sink> json_sink(FILE* out) { return std::make_unique<JsonSink>(out); }

}  // namespace lockstep::tools::exporting
