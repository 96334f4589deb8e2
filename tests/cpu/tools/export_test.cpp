// `lockstep export` of the real sample traces (examples/traces, H200) in both formats, checked as
// a Perfetto reader would take them: the JSON parses and has the trace-event shape; the protobuf
// decodes with protoc against tools/export/perfetto_trace.proto, whose fields are checked against
// Perfetto's published numbers below, and its packets hold together (tracks declared before use,
// interned names defined before use, every slice begun and ended). Perfetto's own trace processor
// (the `perfetto` Python package) is not installable offline, so it is not run here.
#include <sys/wait.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/dynamic_message.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
namespace gp = google::protobuf;

namespace {

const std::string kSamples = LOCKSTEP_SOURCE_DIR "/examples/traces";
const std::string kProtoDir = LOCKSTEP_SOURCE_DIR "/tools/export";

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Records of a sample trace, as `lockstep show` counts them (every record is one event).
size_t record_count(const std::string& dir) {
  Result r = run(std::string(LOCKSTEP_CLI) + " show " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  return static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n'));
}

// Perfetto's published definitions of the fields lockstep writes (github.com/google/perfetto,
// protos/perfetto/trace/: trace.proto, trace_packet.proto, interned_data/interned_data.proto,
// track_event/{track_event,track_descriptor,process_descriptor,debug_annotation}.proto), copied
// by hand: message, field, number, type, repeated.
struct Published {
  const char* message;
  const char* field;
  int number;
  gp::FieldDescriptor::Type type;
  bool repeated;
};
using T = gp::FieldDescriptor;
const Published kPublished[] = {
    {"Trace", "packet", 1, T::TYPE_MESSAGE, true},
    {"TracePacket", "timestamp", 8, T::TYPE_UINT64, false},
    {"TracePacket", "track_event", 11, T::TYPE_MESSAGE, false},
    {"TracePacket", "track_descriptor", 60, T::TYPE_MESSAGE, false},
    {"TracePacket", "trusted_packet_sequence_id", 10, T::TYPE_UINT32, false},
    {"TracePacket", "interned_data", 12, T::TYPE_MESSAGE, false},
    {"TracePacket", "sequence_flags", 13, T::TYPE_UINT32, false},
    {"TrackEvent", "category_iids", 3, T::TYPE_UINT64, true},
    {"TrackEvent", "categories", 22, T::TYPE_STRING, true},
    {"TrackEvent", "name_iid", 10, T::TYPE_UINT64, false},
    {"TrackEvent", "name", 23, T::TYPE_STRING, false},
    {"TrackEvent", "type", 9, T::TYPE_ENUM, false},
    {"TrackEvent", "track_uuid", 11, T::TYPE_UINT64, false},
    {"TrackEvent", "debug_annotations", 4, T::TYPE_MESSAGE, true},
    {"EventCategory", "iid", 1, T::TYPE_UINT64, false},
    {"EventCategory", "name", 2, T::TYPE_STRING, false},
    {"EventName", "iid", 1, T::TYPE_UINT64, false},
    {"EventName", "name", 2, T::TYPE_STRING, false},
    {"TrackDescriptor", "uuid", 1, T::TYPE_UINT64, false},
    {"TrackDescriptor", "parent_uuid", 5, T::TYPE_UINT64, false},
    {"TrackDescriptor", "name", 2, T::TYPE_STRING, false},
    {"TrackDescriptor", "process", 3, T::TYPE_MESSAGE, false},
    {"ProcessDescriptor", "pid", 1, T::TYPE_INT32, false},
    {"ProcessDescriptor", "process_name", 6, T::TYPE_STRING, false},
    {"DebugAnnotation", "name_iid", 1, T::TYPE_UINT64, false},
    {"DebugAnnotation", "name", 10, T::TYPE_STRING, false},
    {"DebugAnnotation", "bool_value", 2, T::TYPE_BOOL, false},
    {"DebugAnnotation", "uint_value", 3, T::TYPE_UINT64, false},
    {"DebugAnnotation", "int_value", 4, T::TYPE_INT64, false},
    {"DebugAnnotation", "double_value", 5, T::TYPE_DOUBLE, false},
    {"DebugAnnotation", "string_value", 6, T::TYPE_STRING, false},
    {"DebugAnnotationName", "iid", 1, T::TYPE_UINT64, false},
    {"DebugAnnotationName", "name", 2, T::TYPE_STRING, false},
    {"InternedData", "event_categories", 1, T::TYPE_MESSAGE, true},
    {"InternedData", "event_names", 2, T::TYPE_MESSAGE, true},
    {"InternedData", "debug_annotation_names", 3, T::TYPE_MESSAGE, true},
};
// Published enum values: TracePacket.SequenceFlags and TrackEvent.Type.
const std::map<std::string, int> kPublishedEnumValues = {
    {"SEQ_UNSPECIFIED", 0},  {"SEQ_INCREMENTAL_STATE_CLEARED", 1},
    {"SEQ_NEEDS_INCREMENTAL_STATE", 2}, {"TYPE_UNSPECIFIED", 0},
    {"TYPE_SLICE_BEGIN", 1}, {"TYPE_SLICE_END", 2},
    {"TYPE_INSTANT", 3},     {"TYPE_COUNTER", 4},
};

class Errors : public gp::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int, const std::string& message) override {
    text += file + ":" + std::to_string(line) + ": " + message + "\n";
  }
  std::string text;
};

// The subset proto, parsed as protoc parses it.
class Subset {
 public:
  Subset() {
    tree_.MapPath("", kProtoDir);
    importer_ = std::make_unique<gp::compiler::Importer>(&tree_, &errors_);
    file_ = importer_->Import("perfetto_trace.proto");
  }
  const gp::FileDescriptor* file() const { return file_; }
  const std::string& errors() const { return errors_.text; }
  const gp::Descriptor* message(const std::string& name) const {
    return importer_->pool()->FindMessageTypeByName("perfetto.protos." + name);
  }

 private:
  gp::compiler::DiskSourceTree tree_;
  Errors errors_;
  std::unique_ptr<gp::compiler::Importer> importer_;
  const gp::FileDescriptor* file_ = nullptr;
};

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lockstep_export_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<std::string> samples() {
  std::vector<std::string> dirs;
  for (const auto& entry : fs::directory_iterator(kSamples))
    if (entry.is_directory()) dirs.push_back(entry.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace

TEST(PerfettoSubset, EveryFieldHasPerfettosPublishedNumberAndType) {
  Subset subset;
  ASSERT_NE(subset.file(), nullptr) << subset.errors();
  std::set<std::string> published;
  for (const Published& p : kPublished) {
    published.insert(std::string(p.message) + "." + p.field);
    const gp::Descriptor* message = subset.message(p.message);
    ASSERT_NE(message, nullptr) << p.message;
    const gp::FieldDescriptor* field = message->FindFieldByName(p.field);
    ASSERT_NE(field, nullptr) << p.message << "." << p.field;
    EXPECT_EQ(field->number(), p.number) << p.message << "." << p.field;
    EXPECT_EQ(field->type(), p.type) << p.message << "." << p.field;
    EXPECT_EQ(field->is_repeated(), p.repeated) << p.message << "." << p.field;
  }
  // Nothing in the subset that the table above has not checked.
  for (int i = 0; i < subset.file()->message_type_count(); ++i) {
    const gp::Descriptor* message = subset.file()->message_type(i);
    for (int f = 0; f < message->field_count(); ++f)
      EXPECT_TRUE(published.count(message->name() + "." + message->field(f)->name()))
          << message->name() << "." << message->field(f)->name() << " is not in the table";
    for (int e = 0; e < message->enum_type_count(); ++e)
      for (int v = 0; v < message->enum_type(e)->value_count(); ++v) {
        const gp::EnumValueDescriptor* value = message->enum_type(e)->value(v);
        auto it = kPublishedEnumValues.find(value->name());
        ASSERT_NE(it, kPublishedEnumValues.end()) << value->name();
        EXPECT_EQ(value->number(), it->second) << value->name();
      }
  }
}

TEST_F(Export, SampleTracesAsJsonHaveTheTraceEventShape) {
  for (const std::string& sample : samples()) {
    const fs::path out = dir_ / "trace.json";
    Result r = run(std::string(LOCKSTEP_CLI) + " export " + sample + " -o " + out.string());
    ASSERT_EQ(r.code, 0) << sample << ": " << r.out;
    nlohmann::json doc = nlohmann::json::parse(read_file(out));  // throws on bad JSON
    ASSERT_TRUE(doc["traceEvents"].is_array()) << sample;
    size_t events = 0;
    std::set<std::pair<int, int>> named_threads;
    for (const nlohmann::json& e : doc["traceEvents"]) {
      ASSERT_TRUE(e["ph"].is_string() && e["pid"].is_number_integer() && e["name"].is_string())
          << e.dump();
      const std::string ph = e["ph"];
      if (ph == "M") {
        if (e["name"] == "thread_name")
          named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
        continue;
      }
      ASSERT_TRUE(ph == "X" || ph == "i") << e.dump();
      EXPECT_TRUE(e["ts"].is_number_unsigned() && e["tid"].is_number_integer()) << e.dump();
      if (ph == "X") EXPECT_EQ(e["dur"], 1) << e.dump();
      EXPECT_TRUE(named_threads.count({e["pid"].get<int>(), e["tid"].get<int>()}))
          << "thread named before use: " << e;
      ++events;
    }
    EXPECT_EQ(events, record_count(sample)) << sample;
  }
}

TEST_F(Export, SampleTracesAsProtobufDecodeWithProtocAndHoldTogether) {
  Subset subset;
  ASSERT_NE(subset.file(), nullptr) << subset.errors();
  gp::DynamicMessageFactory factory(subset.file()->pool());
  for (const std::string& sample : samples()) {
    const fs::path out = dir_ / "trace.pftrace";
    Result r = run(std::string(LOCKSTEP_CLI) + " export " + sample + " -o " + out.string());
    ASSERT_EQ(r.code, 0) << sample << ": " << r.out;
    // protoc, as the brief for CI says: the file is a perfetto.protos.Trace.
    Result decoded = run(std::string(PROTOC) + " --decode=perfetto.protos.Trace -I" + kProtoDir +
                         " " + kProtoDir + "/perfetto_trace.proto < " + out.string());
    ASSERT_EQ(decoded.code, 0) << decoded.out.substr(0, 2000);
    EXPECT_NE(decoded.out.find("TYPE_SLICE_BEGIN"), std::string::npos);

    std::unique_ptr<gp::Message> trace(factory.GetPrototype(subset.message("Trace"))->New());
    ASSERT_TRUE(trace->ParseFromString(read_file(out))) << sample;
    const gp::Reflection* tr = trace->GetReflection();
    const gp::FieldDescriptor* packets = subset.message("Trace")->FindFieldByName("packet");
    const int n = tr->FieldSize(*trace, packets);
    ASSERT_GT(n, 0);
    const gp::Descriptor* packet_type = subset.message("TracePacket");
    auto field = [](const gp::Descriptor* d, const char* name) {
      return d->FindFieldByName(name);
    };
    std::set<uint64_t> tracks, names, keys;
    std::map<uint64_t, int> open;  // track -> slices begun and not ended
    size_t slices = 0, instants = 0;
    for (int i = 0; i < n; ++i) {
      const gp::Message& p = tr->GetRepeatedMessage(*trace, packets, i);
      const gp::Reflection* pr = p.GetReflection();
      EXPECT_EQ(pr->GetUInt32(p, field(packet_type, "trusted_packet_sequence_id")), 1u);
      const uint32_t flags = pr->GetUInt32(p, field(packet_type, "sequence_flags"));
      if (i == 0) EXPECT_TRUE(flags & 1) << "the first packet clears the interning state";
      if (pr->HasField(p, field(packet_type, "interned_data"))) {
        const gp::Message& data = pr->GetMessage(p, field(packet_type, "interned_data"));
        const gp::Reflection* dr = data.GetReflection();
        const gp::Descriptor* d = data.GetDescriptor();
        for (auto [list, into] : {std::pair{"event_names", &names},
                                  std::pair{"debug_annotation_names", &keys}})
          for (int k = 0; k < dr->FieldSize(data, field(d, list)); ++k) {
            const gp::Message& entry = dr->GetRepeatedMessage(data, field(d, list), k);
            uint64_t iid = entry.GetReflection()->GetUInt64(entry, field(entry.GetDescriptor(), "iid"));
            EXPECT_TRUE(into->insert(iid).second) << list << " iid " << iid << " defined twice";
          }
      }
      if (pr->HasField(p, field(packet_type, "track_descriptor"))) {
        const gp::Message& track = pr->GetMessage(p, field(packet_type, "track_descriptor"));
        const gp::Reflection* r2 = track.GetReflection();
        const gp::Descriptor* d = track.GetDescriptor();
        const uint64_t uuid = r2->GetUInt64(track, field(d, "uuid"));
        EXPECT_NE(uuid, 0u);
        if (r2->HasField(track, field(d, "parent_uuid")))
          EXPECT_TRUE(tracks.count(r2->GetUInt64(track, field(d, "parent_uuid"))))
              << "a stream's process track comes first";
        EXPECT_TRUE(tracks.insert(uuid).second) << "track " << uuid << " declared twice";
        continue;
      }
      ASSERT_TRUE(pr->HasField(p, field(packet_type, "track_event"))) << "packet " << i;
      EXPECT_TRUE(flags & 2) << "a track event needs the interned state";
      const gp::Message& event = pr->GetMessage(p, field(packet_type, "track_event"));
      const gp::Reflection* er = event.GetReflection();
      const gp::Descriptor* d = event.GetDescriptor();
      const uint64_t track = er->GetUInt64(event, field(d, "track_uuid"));
      EXPECT_TRUE(tracks.count(track)) << "track " << track << " used before it was declared";
      const int type = er->GetEnumValue(event, field(d, "type"));
      if (type == 2) {  // end
        EXPECT_GT(open[track]--, 0) << "an end without a begin on track " << track;
        continue;
      }
      if (type == 1) ++open[track], ++slices;
      if (type == 3) ++instants;
      EXPECT_TRUE(names.count(er->GetUInt64(event, field(d, "name_iid"))))
          << "name used before it was interned";
      for (int k = 0; k < er->FieldSize(event, field(d, "debug_annotations")); ++k) {
        const gp::Message& a = er->GetRepeatedMessage(event, field(d, "debug_annotations"), k);
        EXPECT_TRUE(keys.count(a.GetReflection()->GetUInt64(a, field(a.GetDescriptor(), "name_iid"))));
      }
    }
    for (auto [track, count] : open) EXPECT_EQ(count, 0) << "slices left open on " << track;
    EXPECT_EQ(slices + instants, record_count(sample)) << sample;
  }
}

TEST_F(Export, DivergentOpsAreMarkedAndAroundDivergenceKeepsOnlyTheStepsNearIt) {
  const std::string a = kSamples + "/cuda-atomic-full-1", b = kSamples + "/cuda-atomic-full-2";
  const fs::path out = dir_ / "near.json";
  Result r = run(std::string(LOCKSTEP_CLI) + " export " + a + " -o " + out.string() +
                 " --against " + b + " --around-divergence 1");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json doc = nlohmann::json::parse(read_file(out));
  std::set<uint64_t> steps;
  bool origin = false;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "M") continue;
    steps.insert(e["args"]["step"].get<uint64_t>());
    if (e["name"].get<std::string>().rfind("[origin] planted_atomic_sum_squares", 0) == 0) {
      origin = true;
      EXPECT_EQ(e["cname"], "terrible");
      EXPECT_TRUE(e["args"].contains("divergence"));
    }
  }
  EXPECT_TRUE(origin) << "the planted kernel is marked as the origin";
  EXPECT_EQ(steps, (std::set<uint64_t>{2, 3, 4})) << "the divergence is at step 3";
}

TEST_F(Export, RankAndStepsChooseTheRecordsAndBadOnesAreOneLine) {
  const std::string a = kSamples + "/cuda-det-full-1";
  const fs::path out = dir_ / "step.pftrace";
  Result r = run(std::string(LOCKSTEP_CLI) + " export " + a + " -o " + out.string() +
                 " --rank 0 --steps 2-3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("steps 2-3"), std::string::npos) << r.out;
  for (const std::string& bad :
       {std::string(" --rank 5"), std::string(" --steps 9-3"), std::string(" --format xml"),
        std::string(" --around-divergence 2"), std::string(" --max-size 1K"),
        std::string(" --max-size lots")}) {
    Result e = run(std::string(LOCKSTEP_CLI) + " export " + a + " -o " + out.string() + bad);
    EXPECT_EQ(e.code, 2) << bad << ": " << e.out;
    EXPECT_EQ(std::count(e.out.begin(), e.out.end(), '\n'), 1) << bad << ": " << e.out;
    EXPECT_EQ(e.out.rfind("lockstep: ", 0), 0u) << bad << ": " << e.out;
  }
  fs::remove(out);
  Result big = run(std::string(LOCKSTEP_CLI) + " export " + a + " -o " + out.string() +
                   " --max-size 1K");
  EXPECT_NE(big.out.find("--max-size"), std::string::npos) << big.out;
  EXPECT_FALSE(fs::exists(out)) << "a refused export writes nothing";
}
