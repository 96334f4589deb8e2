// The one-run audit's rules (tools/audit.h) on values built here: which ranks a disagreement
// names, when a majority says which one, and what is not compared at all.
#include <gtest/gtest.h>

#include "tools/audit.h"

namespace lockstep::tools {
namespace {

AuditCollective collective(int rank, uint64_t recv, uint64_t comm_id = 1, uint64_t nranks = 4,
                           int comm_rank = -1, const char* name = "ncclAllReduce") {
  AuditCollective c;
  c.rank = rank;
  c.step = 3;
  c.name = name;
  c.comm_id = comm_id;
  c.comm_seq = 7;
  c.nranks = nranks;
  c.comm_rank = comm_rank < 0 ? static_cast<uint64_t>(rank) : static_cast<uint64_t>(comm_rank);
  c.recv_bytes = 4096;
  c.has_recv = true;
  c.recv = recv;
  return c;
}

TEST(AuditCollectives, RanksThatReceiveTheSameBytesAreClean) {
  uint64_t checked = 0;
  EXPECT_TRUE(audit_collectives({collective(0, 5), collective(1, 5), collective(2, 5),
                                 collective(3, 5)},
                                &checked)
                  .empty());
  EXPECT_EQ(checked, 1u);
}

TEST(AuditCollectives, OneRankOfFourReceivingOtherBytesIsNamedAgainstTheMajority) {
  const auto findings = audit_collectives(
      {collective(0, 5), collective(1, 5), collective(2, 6), collective(3, 5)});
  ASSERT_EQ(findings.size(), 1u);
  const AuditFinding& f = findings[0];
  EXPECT_TRUE(f.majority);
  EXPECT_EQ(f.suspects, std::vector<int>{2});
  EXPECT_EQ(f.agreeing, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(f.agreed, 5u);
  EXPECT_EQ(f.values, (std::vector<std::pair<int, uint64_t>>{{2, 6}}));
  EXPECT_EQ(f.op, "collective ncclAllReduce comm 1 #7");
  EXPECT_EQ(f.buffer, "recv");
  EXPECT_EQ(f.step, 3u);
}

TEST(AuditCollectives, TwoRanksThatDisagreeAreBothSuspectsWithoutAMajority) {
  const auto findings = audit_collectives({collective(0, 5, 1, 2), collective(1, 6, 1, 2)});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_FALSE(findings[0].majority);
  EXPECT_EQ(findings[0].suspects, (std::vector<int>{0, 1}));
  EXPECT_TRUE(findings[0].agreeing.empty());
}

// Groups made one per set of ranks (torch.distributed.new_group) get the same id on every
// process: ranks 0-1 and 2-3 are two communicators with id 2, each with its own data.
TEST(AuditCollectives, InstancesOfOneIdOnOtherRanksAreNotComparedWithEachOther) {
  auto pair = [](int rank, uint64_t recv) { return collective(rank, recv, 2, 2, rank % 2); };
  EXPECT_TRUE(audit_collectives({pair(0, 5), pair(1, 5), pair(2, 9), pair(3, 9)}).empty());
  const auto findings = audit_collectives({pair(0, 5), pair(1, 6), pair(2, 9), pair(3, 9)});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].suspects, (std::vector<int>{0, 1})) << "ranks 2-3 agree with each other";
}

TEST(AuditCollectives, OnlyCollectivesWhoseRanksAllReceiveTheSameBytesAreChecked) {
  for (const char* name : {"ncclReduceScatter", "ncclReduce", "ncclSend", "ncclRecv",
                           "ncclAllToAll"})
    EXPECT_TRUE(audit_collectives({collective(0, 5, 1, 2, 0, name),
                                   collective(1, 6, 1, 2, 1, name)})
                    .empty())
        << name;
  for (const char* name : {"ncclAllGather", "ncclBroadcast", "ncclBcast"})
    EXPECT_EQ(audit_collectives({collective(0, 5, 1, 2, 0, name), collective(1, 6, 1, 2, 1, name)})
                  .size(),
              1u)
        << name;
  AuditCollective untaken = collective(1, 6);
  untaken.has_recv = false;  // broad outside the fingerprint window
  EXPECT_TRUE(audit_collectives({collective(0, 5), untaken}).empty());
}

// ---- replicas ----------------------------------------------------------------------------

// An in-place update: reads "grad" and "param", writes "param"; a GEMM reads A and B, writes D.
AuditOp update(int rank, uint64_t grad, uint64_t param, uint64_t out,
               trace::RecordKind kind = trace::RecordKind::Kernel) {
  AuditOp op;
  op.rank = rank;
  op.step = 4;
  op.seq = 10;
  op.stream = 1;
  op.kind = kind;
  op.name = kind == trace::RecordKind::Kernel ? "adam_update" : "cublasLtMatmul";
  op.fields = {128, 1, 1};
  const char* in0 = kind == trace::RecordKind::Kernel ? "grad" : "A";
  const char* in1 = kind == trace::RecordKind::Kernel ? "param" : "B";
  const char* o = kind == trace::RecordKind::Kernel ? "param" : "D";
  op.buffers = {{trace::Role::In, in0, 1024, true, grad},
                {trace::Role::In, in1, 1024, true, param},
                {trace::Role::Out, o, 1024, true, out}};
  return op;
}

std::vector<std::vector<AuditOp>> ranks_of(std::vector<AuditOp> ops) {
  std::vector<std::vector<AuditOp>> ranks;
  for (AuditOp& op : ops) {
    ranks.push_back({std::move(op)});
    number_occurrences(ranks.back());
  }
  return ranks;
}

TEST(AuditReplicas, ReplicasWithEqualInputsComputingOtherBytesNameTheOddOne) {
  uint64_t checked = 0;
  EXPECT_TRUE(
      audit_replicas(ranks_of({update(0, 1, 2, 3), update(1, 1, 2, 3), update(2, 1, 2, 3)}),
                     &checked)
          .empty());
  EXPECT_EQ(checked, 1u);
  const auto findings =
      audit_replicas(ranks_of({update(0, 1, 2, 3), update(1, 1, 2, 4), update(2, 1, 2, 3)}));
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, AuditFinding::Rule::Replica);
  EXPECT_EQ(findings[0].suspects, std::vector<int>{1});
  EXPECT_EQ(findings[0].agreeing, (std::vector<int>{0, 2}));
  EXPECT_EQ(findings[0].buffer, "param");
  EXPECT_EQ(findings[0].op, "kernel adam_update #1 stream 1");
}

TEST(AuditReplicas, OpsWhoseInputsDifferAreNotReplicas) {
  // Data-parallel ranks' forward ops read their own batches: other outputs are expected.
  uint64_t checked = 0;
  EXPECT_TRUE(
      audit_replicas(ranks_of({update(0, 1, 2, 3), update(1, 7, 2, 4), update(2, 8, 2, 5)}),
                     &checked)
          .empty());
  EXPECT_EQ(checked, 0u);
  AuditOp unhashed = update(1, 1, 2, 4);
  unhashed.buffers[0].valid = false;  // an input without a fingerprint: nothing says it agreed
  EXPECT_TRUE(audit_replicas(ranks_of({update(0, 1, 2, 3), unhashed})).empty());
}

TEST(AuditReplicas, AGuessedRegionIsComparedOnlyWhereItWasEqualBeforeTheOp) {
  // A kernel's region runs to the end of its allocation: without the same region as an input,
  // bytes the kernel never wrote may differ between ranks.
  AuditOp a = update(0, 1, 2, 3), b = update(1, 1, 2, 4);
  a.buffers[2].label = b.buffers[2].label = "workspace";
  EXPECT_TRUE(audit_replicas(ranks_of({a, b})).empty());
  // A GEMM's operands are exact extents: D is compared whatever its label.
  EXPECT_EQ(audit_replicas(ranks_of({update(0, 1, 2, 3, trace::RecordKind::Gemm),
                                     update(1, 1, 2, 4, trace::RecordKind::Gemm)}))
                .size(),
            1u);
}

}  // namespace
}  // namespace lockstep::tools
