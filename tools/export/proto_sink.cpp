// Perfetto's protobuf trace, written a packet at a time: a Trace is only its repeated `packet`
// field (number 1), so the file is a run of (tag, length, TracePacket) and never needs the
// whole message in memory. Names, categories and argument keys are interned on one packet
// sequence: each is written once, in the first packet that uses it, then referred to by number.
#include <unordered_map>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "perfetto_trace.pb.h"
#include "tools/export/sink.h"

namespace lockstep::tools::exporting {
namespace {

namespace pb = perfetto::protos;

constexpr uint32_t kSequence = 1;  // the one packet sequence of the file (0 is invalid)
constexpr uint32_t kTracePacketTag = (1 << 3) | 2;  // Trace.packet: field 1, length-delimited
// A record is 1 us long at seq us, like the JSON's; the slice ends 1 ns early so that the next
// record's begin never lands on its end whatever order a reader sorts equal timestamps in.
constexpr uint64_t kUnitNs = 1000, kSliceNs = kUnitNs - 1;

// Track uuids: rank r's process track is (r + 1) << 32, its stream s track that | (s + 1).
uint64_t process_uuid(int rank) { return (static_cast<uint64_t>(rank) + 1) << 32; }
uint64_t stream_uuid(int rank, uint32_t stream) {
  return process_uuid(rank) | (static_cast<uint64_t>(stream) + 1);
}
// Thread t's scope track: the high bit of the low word set (stream ordinals stay far below it).
uint64_t scope_uuid(int rank, uint32_t thread) {
  return process_uuid(rank) | 0x80000000u | (thread & 0x7fffffffu);
}

class Interned {
 public:
  // The string's iid; *fresh set when this is its first use (the caller then defines it).
  uint64_t id(const std::string& text, bool* fresh) {
    auto [it, inserted] = ids_.try_emplace(text, ids_.size() + 1);
    *fresh = inserted;
    return it->second;
  }

 private:
  std::unordered_map<std::string, uint64_t> ids_;
};

class ProtoSink : public Sink {
 public:
  explicit ProtoSink(FILE* out) : out_(out) {}

  void rank(int rank) override {
    pb::TracePacket packet;
    pb::TrackDescriptor* track = packet.mutable_track_descriptor();
    track->set_uuid(process_uuid(rank));
    // pid 0 is the kernel's idle task to Perfetto's trace processor; ranks start at 1.
    track->mutable_process()->set_pid(rank + 1);
    track->mutable_process()->set_process_name(fmt::format("rank {}", rank));
    write(packet);
  }

  void stream(int rank, uint32_t stream) override {
    pb::TracePacket packet;
    pb::TrackDescriptor* track = packet.mutable_track_descriptor();
    track->set_uuid(stream_uuid(rank, stream));
    track->set_parent_uuid(process_uuid(rank));
    track->set_name(stream ? fmt::format("stream {}", stream) : "no stream");
    write(packet);
  }

  void scope_track(int rank, uint32_t thread) override {
    pb::TracePacket packet;
    pb::TrackDescriptor* track = packet.mutable_track_descriptor();
    track->set_uuid(scope_uuid(rank, thread));
    track->set_parent_uuid(process_uuid(rank));
    track->set_name(fmt::format("thread {} scopes", thread));
    write(packet);
  }

  void event(const Event& e) override {
    const uint64_t track =
        e.scope_thread ? scope_uuid(e.rank, *e.scope_thread) : stream_uuid(e.rank, e.stream);
    pb::TracePacket packet;
    packet.set_timestamp(e.seq * kUnitNs + e.depth);
    packet.set_sequence_flags(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    pb::TrackEvent* event = packet.mutable_track_event();
    event->set_type(e.instant ? pb::TrackEvent::TYPE_INSTANT : pb::TrackEvent::TYPE_SLICE_BEGIN);
    event->set_track_uuid(track);
    bool fresh = false;
    uint64_t iid = names_.id(e.name, &fresh);
    event->set_name_iid(iid);
    if (fresh) {
      pb::EventName* name = packet.mutable_interned_data()->add_event_names();
      name->set_iid(iid);
      name->set_name(e.name);
    }
    auto category = [&](const std::string& text) {
      uint64_t id = categories_.id(text, &fresh);
      event->add_category_iids(id);
      if (fresh) {
        pb::EventCategory* c = packet.mutable_interned_data()->add_event_categories();
        c->set_iid(id);
        c->set_name(text);
      }
    };
    category(e.category);
    if (e.divergent) category("divergent");
    for (const Arg& a : e.args) {
      pb::DebugAnnotation* annotation = event->add_debug_annotations();
      uint64_t key = keys_.id(a.key, &fresh);
      annotation->set_name_iid(key);
      if (fresh) {
        pb::DebugAnnotationName* name = packet.mutable_interned_data()->add_debug_annotation_names();
        name->set_iid(key);
        name->set_name(a.key);
      }
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
              annotation->set_string_value(v);
            else if constexpr (std::is_same_v<T, uint64_t>)
              annotation->set_uint_value(v);
            else if constexpr (std::is_same_v<T, int64_t>)
              annotation->set_int_value(v);
            else
              annotation->set_bool_value(v);
          },
          a.value);
    }
    write(packet);
    if (e.instant) return;
    pb::TracePacket end;
    end.set_timestamp((e.seq + e.length - 1) * kUnitNs + kSliceNs - e.depth);
    end.set_sequence_flags(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    end.mutable_track_event()->set_type(pb::TrackEvent::TYPE_SLICE_END);
    end.mutable_track_event()->set_track_uuid(track);
    write(end);
  }

  void finish() override {}
  uint64_t bytes() const override { return bytes_; }

 private:
  void write(pb::TracePacket& packet) {
    packet.set_trusted_packet_sequence_id(kSequence);
    if (first_) {
      // Interning state starts here; every later packet may refer to what came before.
      packet.set_sequence_flags(packet.sequence_flags() |
                                pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      first_ = false;
    }
    std::string body = packet.SerializeAsString();
    std::string framed;
    {
      google::protobuf::io::StringOutputStream stream(&framed);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.WriteTag(kTracePacketTag);
      coded.WriteVarint32(static_cast<uint32_t>(body.size()));
    }
    framed += body;
    std::fwrite(framed.data(), 1, framed.size(), out_);
    bytes_ += framed.size();
  }

  FILE* out_;
  uint64_t bytes_ = 0;
  bool first_ = true;
  Interned names_, categories_, keys_;
};

}  // namespace

std::unique_ptr<Sink> proto_sink(FILE* out) { return std::make_unique<ProtoSink>(out); }

}  // namespace lockstep::tools::exporting
