#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "collectors/group_queue.h"

namespace lockstep::collectors {
namespace {

// A fake hash sink: what would be enqueued, per stream, in order.
struct Pending {
  std::string op;
  int stream;
};

TEST(GroupQueue, OutsideAGroupNothingIsDeferred) {
  GroupQueue<Pending> q;
  EXPECT_FALSE(q.defer({"allreduce", 1}));
  EXPECT_TRUE(q.end().empty());  // unmatched end is harmless
  EXPECT_FALSE(q.in_group());
}

TEST(GroupQueue, NestedGroupsFlushAfterTheOutermostEndInCallOrder) {
  GroupQueue<Pending> q;
  std::vector<Pending> sink;
  q.start();
  EXPECT_TRUE(q.defer({"send", 1}));
  q.start();
  EXPECT_TRUE(q.defer({"recv", 2}));
  EXPECT_TRUE(q.end().empty()) << "inner end must not flush";
  EXPECT_TRUE(q.defer({"allreduce", 1}));
  for (Pending& p : q.end()) sink.push_back(p);
  ASSERT_EQ(sink.size(), 3u);
  EXPECT_EQ(sink[0].op, "send");
  EXPECT_EQ(sink[1].op, "recv");
  EXPECT_EQ(sink[1].stream, 2);
  EXPECT_EQ(sink[2].op, "allreduce");
  EXPECT_FALSE(q.in_group());
  EXPECT_FALSE(q.defer({"after", 1}));
}

TEST(GroupQueue, ThreadLocalQueuesDoNotMix) {
  thread_local GroupQueue<Pending> queue;
  std::atomic<int> flushed_in_other{0};
  queue.start();
  queue.defer({"main", 0});
  std::thread other([&] {
    queue.start();
    queue.defer({"other", 1});
    flushed_in_other = static_cast<int>(queue.end().size());
  });
  other.join();
  EXPECT_EQ(flushed_in_other.load(), 1);
  auto mine = queue.end();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].op, "main");
}

TEST(GroupQueue, NonBlockingCommunicatorsArePolledUntilEnqueued) {
  int polls = 0;
  ncclResult_t state = wait_until_enqueued(
      [&] { return ++polls < 5 ? ncclInProgress : ncclSuccess; }, std::chrono::seconds(5));
  EXPECT_EQ(state, ncclSuccess);
  EXPECT_EQ(polls, 5);
  state = wait_until_enqueued([] { return ncclInProgress; }, std::chrono::milliseconds(20));
  EXPECT_EQ(state, ncclInProgress);
  EXPECT_EQ(wait_until_enqueued([] { return ncclSystemError; }, std::chrono::seconds(1)),
            ncclSystemError);
}

}  // namespace
}  // namespace lockstep::collectors
