// The threads of a rank: the configured count wins, then OMP_NUM_THREADS, then the rank's share of
// its node's cores capped by its affinity; a launcher's binding below the share is noted.
#include <gtest/gtest.h>

#include "worker/thread_count.h"

namespace linea {
namespace {

ThreadFacts node(int cores, int local_ranks, int bound_cores, bool under_launcher) {
  ThreadFacts f;
  f.cores = cores;
  f.local_ranks = local_ranks;
  f.bound_cores = bound_cores;
  f.under_launcher = under_launcher;
  return f;
}

TEST(ThreadCount, ShareOfTheNodeCappedByTheAffinity) {
  EXPECT_EQ(choose_threads(node(16, 1, 16, false)).count, 16);
  EXPECT_EQ(choose_threads(node(16, 2, 16, true)).count, 8);
  EXPECT_EQ(choose_threads(node(16, 32, 16, true)).count, 1);  // more ranks than cores
  EXPECT_EQ(choose_threads(node(16, 2, 8, true)).note, "");    // bound to exactly its share
  EXPECT_EQ(choose_threads(node(16, 1, 4, false)).count, 4);   // a cpuset: the user's choice, no note
  EXPECT_EQ(choose_threads(node(16, 1, 4, false)).note, "");
}

TEST(ThreadCount, ConfiguredAndEnvironmentWin) {
  ThreadFacts f = node(16, 2, 1, true);
  f.omp_num_threads = 3;
  EXPECT_EQ(choose_threads(f).count, 3);
  f.configured = 5;
  EXPECT_EQ(choose_threads(f).count, 5);
  EXPECT_EQ(choose_threads(f).note, "");
}

TEST(ThreadCount, ALaunchersBindingBelowTheShareIsNoted) {
  const ThreadChoice c = choose_threads(node(32, 2, 1, true));
  EXPECT_EQ(c.count, 1);
  for (const char* part : {"bound this rank to 1 of the node's 32 cores", "its share, 16", "--bind-to none",
                           "--map-by slot:PE=16", "train.threads"}) {
    EXPECT_NE(c.note.find(part), std::string::npos) << part << " in: " << c.note;
  }
}

TEST(ThreadCount, ThisProcess) {
  const ThreadFacts f = this_process_thread_facts(0, 1);
  EXPECT_GE(f.cores, 1);
  EXPECT_GE(f.bound_cores, 1);
  EXPECT_GE(choose_threads(f).count, 1);
}

}  // namespace
}  // namespace linea
