// torch_allocator_env: which PyTorch allocator settings `lockstep run` gives the job.
#include <gtest/gtest.h>

#include "tools/launch.h"
#include "tools/run_set.h"

namespace lockstep::tools {
namespace {

std::string value_of(const EnvChange& change, const std::string& name) {
  for (const auto& [n, v] : change.set)
    if (n == name) return v;
  return "<unset>";
}

TEST(TorchAllocator, AutoUsesCudaMallocAsyncAtFullOnly) {
  EnvChange full = torch_allocator_env("auto", "full", nullptr);
  EXPECT_EQ(value_of(full, "PYTORCH_CUDA_ALLOC_CONF"), "backend:cudaMallocAsync");
  EXPECT_FALSE(full.note.empty());
  for (const char* level : {"off", "metrics", "broad"}) {
    EnvChange other = torch_allocator_env("auto", level, nullptr);
    EXPECT_TRUE(other.set.empty()) << level;
    EXPECT_TRUE(other.note.empty()) << level;
  }
}

TEST(TorchAllocator, AutoKeepsTheUsersOwnConfiguration) {
  EXPECT_TRUE(torch_allocator_env("auto", "full", "expandable_segments:True").set.empty());
  EXPECT_EQ(value_of(torch_allocator_env("auto", "full", ""), "PYTORCH_CUDA_ALLOC_CONF"),
            "backend:cudaMallocAsync");  // set but empty: as unset
}

TEST(TorchAllocator, ExplicitModes) {
  EXPECT_EQ(value_of(torch_allocator_env("async", "broad", "max_split_size_mb:128"),
                     "PYTORCH_CUDA_ALLOC_CONF"),
            "max_split_size_mb:128,backend:cudaMallocAsync");
  EXPECT_TRUE(torch_allocator_env("async", "full", "backend:native").set.empty());
  EnvChange none = torch_allocator_env("none", "full", nullptr);
  EXPECT_EQ(value_of(none, "PYTORCH_NO_CUDA_MEMORY_CACHING"), "1");
  EXPECT_EQ(value_of(none, "PYTORCH_CUDA_ALLOC_CONF"), "<unset>");
  EXPECT_TRUE(torch_allocator_env("keep", "full", nullptr).set.empty());
  EXPECT_THROW(torch_allocator_env("fast", "full", nullptr), InputError);
}

}  // namespace
}  // namespace lockstep::tools
