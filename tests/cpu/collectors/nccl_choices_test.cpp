// NCCL's choices (collectors/nccl_choices.h), the pure parts: NCCL's names to the trace's
// values, the thread's queue and its matching, and whether the shim offers itself as NCCL's
// profiler plugin when it loads (a plugin the job set is kept).
#include "collectors/nccl_choices.h"

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

NcclChoice choice(const char* func, uintptr_t send, uintptr_t recv, const char* algo) {
  NcclChoice c;
  c.func = func;
  c.send = reinterpret_cast<const void*>(send);
  c.recv = reinterpret_cast<const void*>(recv);
  c.algo = algo;
  c.proto = "Simple";
  c.channels = 2;
  return c;
}
const void* ptr(uintptr_t p) { return reinterpret_cast<const void*>(p); }

TEST(NcclChoices, NcclsNamesReadAsTheTraceTablesValues) {
  EXPECT_EQ(nccl_algo_value("Tree"), 1u);
  EXPECT_EQ(nccl_algo_value("Ring"), 2u);
  EXPECT_EQ(nccl_algo_value("NVLS"), 5u);
  EXPECT_EQ(nccl_algo_value("NVLSTree"), 6u);
  EXPECT_EQ(nccl_algo_value("PAT"), 7u);
  EXPECT_EQ(nccl_proto_value("LL"), 1u);
  EXPECT_EQ(nccl_proto_value("LL128"), 2u);
  EXPECT_EQ(nccl_proto_value("Simple"), 3u);
}

TEST(NcclChoices, NoNameIsNotRecordedAndANewNameIsOther) {
  EXPECT_EQ(nccl_algo_value(nullptr), 0u);
  EXPECT_EQ(nccl_algo_value(""), 0u);
  EXPECT_EQ(nccl_algo_value("Undef"), 255u);
  EXPECT_EQ(nccl_proto_value("LL256"), 255u);
}

TEST(NcclChoices, NcclsFunctionNamesMatchTheirApis) {
  EXPECT_TRUE(nccl_func_matches("AllReduce", NcclOp::AllReduce));
  EXPECT_TRUE(nccl_func_matches("Broadcast", NcclOp::Broadcast));
  EXPECT_TRUE(nccl_func_matches("Broadcast", NcclOp::Bcast));
  EXPECT_TRUE(nccl_func_matches("ReduceScatter", NcclOp::ReduceScatter));
  EXPECT_FALSE(nccl_func_matches("AllReduce", NcclOp::Reduce));
  EXPECT_FALSE(nccl_func_matches("Reduce", NcclOp::AllReduce));
}

TEST(NcclChoices, AChoiceOutsideAWindowIsNotKept) {
  nccl_choice(choice("AllReduce", 1, 2, "Ring"));
  choices_open();
  EXPECT_FALSE(take_choice(NcclOp::AllReduce, ptr(1), ptr(2), true));
  choices_close();
}

TEST(NcclChoices, ACallTakesTheChoiceOfItsBuffersThenOfItsReceiveBuffer) {
  choices_open();  // a group
  nccl_choice(choice("AllReduce", 3, 4, "Tree"));
  nccl_choice(choice("AllReduce", 1, 2, "Ring"));
  nccl_choice(choice("AllGather", 5, 6, "Ring"));
  nccl_choice(choice("AllReduce", 9, 8, "NVLS"));  // NCCL moved the send buffer
  auto first = take_choice(NcclOp::AllReduce, ptr(1), ptr(2), false);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->algo, 2u);
  EXPECT_EQ(first->proto, 3u);
  EXPECT_EQ(first->channels, 2u);
  EXPECT_EQ(take_choice(NcclOp::AllReduce, ptr(3), ptr(4), false)->algo, 1u);
  EXPECT_EQ(take_choice(NcclOp::AllReduce, ptr(7), ptr(8), false)->algo, 5u);
  // Taken once; another function's choice is never an all-reduce's.
  EXPECT_FALSE(take_choice(NcclOp::AllReduce, ptr(1), ptr(2), false));
  EXPECT_FALSE(take_choice(NcclOp::AllReduce, ptr(5), ptr(6), true));
  EXPECT_EQ(take_choice(NcclOp::AllGather, ptr(5), ptr(6), false)->algo, 2u);
  choices_close();
}

TEST(NcclChoices, TheOnlyCallOpenTakesItsFunctionsChoiceWhateverTheBuffers) {
  choices_open();
  nccl_choice(choice("Broadcast", 10, 11, "Ring"));
  EXPECT_FALSE(take_choice(NcclOp::Bcast, ptr(1), ptr(1), false));
  EXPECT_EQ(take_choice(NcclOp::Bcast, ptr(1), ptr(1), true)->algo, 2u);
  choices_close();
}

TEST(NcclChoices, LeftoversAreDroppedWhenTheOutermostWindowCloses) {
  choices_open();  // group
  choices_open();  // a call in it
  nccl_choice(choice("AllReduce", 1, 2, "Ring"));
  choices_close();  // the call: the group is still open
  EXPECT_TRUE(take_choice(NcclOp::AllReduce, ptr(1), ptr(2), false));
  nccl_choice(choice("AllReduce", 1, 2, "Ring"));
  choices_close();  // the group
  choices_open();
  EXPECT_FALSE(take_choice(NcclOp::AllReduce, ptr(1), ptr(2), true));
  choices_close();
}

ConfigResult config(Level level, bool setting) {
  ConfigResult c;
  c.config.level = level;
  c.config.nccl_profiler = setting;
  return c;
}

TEST(NcclProfilerDecision, AJobWithoutAProfilerPluginGetsTheShim) {
  EXPECT_EQ(nccl_profiler_decision(config(Level::Broad, true), nullptr, false, 40).action,
            ProfilerDecision::Set);
  EXPECT_EQ(nccl_profiler_decision(config(Level::Full, true), "", false, 40).action,
            ProfilerDecision::Set);
  EXPECT_TRUE(
      nccl_profiler_decision(config(Level::Full, true), nullptr, false, 40).message.empty());
}

TEST(NcclProfilerDecision, TheJobsOwnPluginIsKeptAndOneLineSaysTheChoicesAreNotRecorded) {
  const ProfilerDecision d = nccl_profiler_decision(config(Level::Broad, true),
                                                    "/opt/libnccl-profiler-mine.so", false, 40);
  EXPECT_EQ(d.action, ProfilerDecision::KeepJobs);
  EXPECT_NE(d.message.find("NCCL_PROFILER_PLUGIN=/opt/libnccl-profiler-mine.so"), std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("will not be recorded"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find('\n'), std::string::npos) << "one line";
  // "none" is the job's choice too.
  EXPECT_EQ(nccl_profiler_decision(config(Level::Broad, true), "none", false, 40).action,
            ProfilerDecision::KeepJobs);
}

TEST(NcclProfilerDecision, TheShimAlreadyNamedByAParentProcessIsLeftSilently) {
  const ProfilerDecision d =
      nccl_profiler_decision(config(Level::Broad, true), "/x/liblockstep.so", true, 40);
  EXPECT_EQ(d.action, ProfilerDecision::Leave);
  EXPECT_TRUE(d.message.empty());
}

TEST(NcclProfilerDecision, NothingIsTouchedWhenOffOrWhenNoCollectiveIsRecorded) {
  EXPECT_EQ(nccl_profiler_decision(config(Level::Full, false), nullptr, false, 40).action,
            ProfilerDecision::Leave);
  EXPECT_TRUE(nccl_profiler_decision(config(Level::Full, false), "/opt/mine.so", false, 40)
                  .message.empty());
  EXPECT_EQ(nccl_profiler_decision(config(Level::Metrics, true), nullptr, false, 40).action,
            ProfilerDecision::Leave);
  EXPECT_EQ(nccl_profiler_decision(config(Level::Off, true), nullptr, false, 40).action,
            ProfilerDecision::Leave);
  ConfigResult bad = config(Level::Broad, true);
  bad.errors.push_back("lockstep: LOCKSTEP_LEVEL=fast is not one of ...");
  EXPECT_EQ(nccl_profiler_decision(bad, nullptr, false, 40).action, ProfilerDecision::Leave);
}

TEST(NcclProfilerDecision, APathLongerThanNcclReadsIsNotSetAndSaidOnce) {
  const ProfilerDecision d =
      nccl_profiler_decision(config(Level::Broad, true), nullptr, false, kNcclPluginNameMax + 1);
  EXPECT_EQ(d.action, ProfilerDecision::Leave);
  EXPECT_NE(d.message.find("longer than the 254 characters"), std::string::npos) << d.message;
  EXPECT_EQ(
      nccl_profiler_decision(config(Level::Broad, true), nullptr, false, kNcclPluginNameMax).action,
      ProfilerDecision::Set);
}

TEST(NcclProfilerDecision, TheSettingReadsAutoAndTheSwitchWords) {
  auto parsed = [](const char* value) {
    return parse_config([value](const char* name) -> const char* {
      return std::string(name) == "LOCKSTEP_NCCL_PROFILER" ? value : nullptr;
    });
  };
  EXPECT_TRUE(parsed("auto").config.nccl_profiler);
  EXPECT_TRUE(parsed("1").config.nccl_profiler);
  EXPECT_FALSE(parsed("0").config.nccl_profiler);
  EXPECT_TRUE(parsed(nullptr).config.nccl_profiler);
  EXPECT_FALSE(parsed("sometimes").ok());
}

}  // namespace
}  // namespace lockstep::collectors
