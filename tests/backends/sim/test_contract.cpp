// The SimGrid backend under the shared backend contract: check, prepare once, run repeatably,
// and the Measurement of a simulation.

#include <gtest/gtest.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/schedule/generate.hpp"
#include "sim_fixtures.hpp"

namespace compass::backends::sim {
namespace {

using testing::star_profile;

TEST(SimContract, PreparedRunsRepeatablyAndMatchesSimulate) {
  const hardware::Profile p = star_profile(4, 50e9, 1e-6);
  const schedule::Schedule s = schedule::ring_allgather(4, 64, 256);
  ASSERT_TRUE(check(p, s).ok());
  auto prep = Prepared::create(p, s);
  ASSERT_TRUE(prep.ok()) << prep.error().message;
  auto a = prep->simulate();
  auto b = prep->simulate();
  auto c = simulate(p, s);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_GT(a->total_s, 0);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
  // The contract's run: the same simulation as a Measurement.
  auto m = prep->run(RunOptions{});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->times_s, measurement(*a).times_s);
  ASSERT_EQ(m->times_s.size(), 1u);
  EXPECT_EQ(m->median_s, a->total_s);
  EXPECT_EQ(m->min_s, a->total_s);
  EXPECT_EQ(m->resources, a->resources);
  EXPECT_FALSE(m->check.checked);
}

TEST(SimContract, RunChecksItsOptionsLikeEveryBackend) {
  const hardware::Profile p = star_profile(2, 50e9, 1e-6);
  auto prep = Prepared::create(p, schedule::ring_allgather(2, 8, 8));
  ASSERT_TRUE(prep.ok()) << prep.error().message;
  RunOptions o;
  o.repeat = 0;
  auto m = prep->run(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("repeat"), std::string::npos) << m.error().message;
}

TEST(SimContract, CheckNamesTheProblem) {
  const hardware::Profile p = star_profile(2, 50e9, 1e-6);
  const schedule::Schedule s = schedule::ring_allgather(4, 8, 8);  // 4 ranks, 2 GPUs
  const Status st = check(p, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("GPU"), std::string::npos) << st.error().message;
  EXPECT_FALSE(Prepared::create(p, s).ok());
}

}  // namespace
}  // namespace compass::backends::sim
