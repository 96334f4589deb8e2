// Chrome trace-event JSON, written an event at a time (nlohmann per event; the array by hand so
// that nothing is held in memory).
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "tools/export/sink.h"

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

  void event(const Event& e) override {
    nlohmann::json args = nlohmann::json::object();
    for (const Arg& a : e.args) std::visit([&](const auto& v) { args[a.key] = v; }, a.value);
    nlohmann::json event = {{"ph", e.instant ? "i" : "X"},
                            {"pid", e.rank},
                            {"tid", e.stream},
                            {"ts", e.seq},
                            {"name", e.name},
                            {"cat", e.category},
                            {"args", std::move(args)}};
    if (e.instant)
      event["s"] = "p";
    else
      event["dur"] = 1;
    if (e.divergent) event["cname"] = e.receiver ? "bad" : "terrible";
    emit(event);
  }

  void finish() override { write("\n]}\n"); }
  uint64_t bytes() const override { return bytes_; }

 private:
  void emit(const nlohmann::json& event) {
    write(separator_);
    write(event.dump());
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
