// The multi-process session without other processes: the agreement on what every rank runs,
// the combination of the ranks' numbers, and a session of one process (the variables torchrun
// sets, on loopback) driven through a fake transport that plays the other ranks.

#include "compass/backends/launch/session.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "support/ports.hpp"

namespace compass::backends::launch {
namespace {

RunDescription shape(const std::string& m, const std::string& strategy = "all") {
  return {{"--op", "ag_gemm"}, {"--m", m}, {"--n", "48"}, {"--strategy", strategy}};
}

TEST(RunDescription, EncodesAndDecodesEveryCharacter) {
  const RunDescription d = {{"--gpus", "0,1"}, {"--links", "a=b\nc\\d"}, {"--gpus", ""}};
  const auto back = decode_description(encode_description(d));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, d);
  EXPECT_FALSE(decode_description("--m=1").ok());  // the last line is cut off
  EXPECT_FALSE(decode_description("no equals sign\n").ok());
  EXPECT_FALSE(decode_description("--m=\\x\n").ok());
}

TEST(RunDescription, HashesDifferWhenAValueDiffers) {
  EXPECT_EQ(description_hash(shape("96")), description_hash(shape("96")));
  EXPECT_NE(description_hash(shape("96")), description_hash(shape("128")));
  EXPECT_EQ(description_hash(shape("96")).size(), 16u);
}

TEST(Agreement, EqualRanksAgree) {
  const std::string m = agreement_message(shape("96"));
  EXPECT_TRUE(check_agreement({m, m, m}).ok());
  EXPECT_TRUE(check_agreement({m}).ok());
}

TEST(Agreement, NamesTheFirstRankAndFlagThatDiffer) {
  const Status st = check_agreement({agreement_message(shape("96")), agreement_message(shape("96")),
                                     agreement_message(shape("128", "fuse:ring"))});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "the ranks were given different runs: rank 2 was given --m 128 where rank 0 was given "
            "--m 96");
}

TEST(Agreement, AStrategyMismatchIsNamed) {
  const Status st = check_agreement(
      {agreement_message(shape("96", "fuse:ring")), agreement_message(shape("96", "sequential"))});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 1 was given --strategy sequential where rank 0 was given "
                                    "--strategy fuse:ring"),
            std::string::npos)
      << st.error().message;
}

TEST(Agreement, AnEmptyValueIsShownAsEmpty) {
  RunDescription a = shape("96"), b = shape("96");
  a.push_back({"--gpus", "0,1"});
  b.push_back({"--gpus", ""});
  const Status st = check_agreement({agreement_message(a), agreement_message(b)});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 1 was given --gpus ''"), std::string::npos)
      << st.error().message;
}

TEST(Agreement, ADescriptionOneRankLacksIsNamed) {
  RunDescription longer = shape("96");
  longer.push_back({"--seed", "1"});
  const Status st = check_agreement({agreement_message(shape("96")), agreement_message(longer)});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 1 describes '--seed', which rank 0 does not"),
            std::string::npos)
      << st.error().message;
}

TEST(Agreement, RefusesMessagesItDidNotMake) {
  const std::string good = agreement_message(shape("96"));
  EXPECT_FALSE(check_agreement({good, "no newline"}).ok());
  // A hash that does not match the pairs it comes with.
  std::string forged = good;
  forged[0] = forged[0] == '0' ? '1' : '0';
  EXPECT_FALSE(check_agreement({good, forged}).ok());
}

TEST(RankNumbers, CombineTakesTheSlowestRankPerIterationAndTheLargestError) {
  const RankNumbers a{{1.0, 4.0}, 1e-6, 2.0, 1};
  const RankNumbers b{{3.0, 2.0}, 5e-6, 1.5, 2};
  const auto c = combine_numbers({encode_numbers(a), encode_numbers(b)}, 2);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->times_s, (std::vector<double>{3.0, 4.0}));
  EXPECT_EQ(c->max_abs_error, 5e-6);
  EXPECT_EQ(c->max_ref_abs, 2.0);
  EXPECT_EQ(c->threads, 3);
}

TEST(RankNumbers, ANanErrorStaysAFailure) {
  const RankNumbers a{{1.0}, std::numeric_limits<double>::quiet_NaN(), 1.0, 1};
  const RankNumbers b{{1.0}, 1e-6, 1.0, 1};
  for (const auto& order : {std::vector{a, b}, std::vector{b, a}}) {
    const auto c = combine_numbers({encode_numbers(order[0]), encode_numbers(order[1])}, 1);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(std::isinf(c->max_abs_error));
  }
}

TEST(RankNumbers, ARankThatRanSomethingElseIsAnError) {
  const auto c =
      combine_numbers({encode_numbers({{1.0, 2.0}, 0, 0, 1}), encode_numbers({{1.0}, 0, 0, 1})}, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("rank 1 sent 4 numbers"), std::string::npos)
      << c.error().message;
  EXPECT_FALSE(combine_numbers({}, 1).ok());
}

TEST(RankNumbers, AThreadCountThatIsNoSmallWholeNumberIsAnError) {
  // The numbers come from another process; found by the agreement fuzzer (-2.1e110 threads).
  for (double bad : {-2.14555e110, 1e300, -1.0, 2.5, std::nan("")}) {
    std::vector<double> v = encode_numbers({{1.0}, 0, 0, 1});
    v.back() = bad;
    const auto c = combine_numbers({encode_numbers({{1.0}, 0, 0, 1}), v}, 1);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.error().message.find("rank 1 sent a thread count"), std::string::npos)
        << c.error().message;
  }
}

TEST(LaunchKind, ParsesItsNames) {
  EXPECT_EQ(*parse_launch_kind("mpi"), LaunchKind::mpi);
  EXPECT_EQ(*parse_launch_kind("env"), LaunchKind::env);
  EXPECT_EQ(to_string(LaunchKind::env), "env");
  EXPECT_FALSE(parse_launch_kind("threads").ok());
}

// Plays the other ranks of a job: their agreement messages and numbers, and records what the
// session asked for.
class FakeRanks final : public Collectives {
 public:
  std::vector<std::string> others;                 ///< ranks 1.. agreement messages
  std::vector<std::vector<double>> other_numbers;  ///< ranks 1.. numbers
  double farewell_timeout_s = -1;
  int barriers = 0;

  Status barrier(double) override {
    ++barriers;
    return Status::success();
  }
  bool farewell(double timeout_s) override {
    farewell_timeout_s = timeout_s;
    return true;
  }
  Result<std::vector<std::string>> all_gather(const std::string& mine, double) override {
    std::vector<std::string> all{mine};
    all.insert(all.end(), others.begin(), others.end());
    return all;
  }
  Result<std::vector<std::vector<double>>> gather(const std::vector<double>& mine,
                                                  double) override {
    std::vector<std::vector<double>> all{mine};
    all.insert(all.end(), other_numbers.begin(), other_numbers.end());
    return all;
  }
};

// A session of one process started from torchrun's variables (rank 0 serves the store).
std::unique_ptr<Session> env_session() {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  const int port = compass::testing::free_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  SessionOptions o;
  o.kind = LaunchKind::env;
  o.start_timeout_s = 10;
  auto s = Session::start(o);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(Session, StartsFromTheLauncherVariables) {
  auto s = env_session();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind(), LaunchKind::env);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->size(), 1);
  EXPECT_NE(s->store(), nullptr);
  EXPECT_EQ(s->mpi(), nullptr);
  EXPECT_EQ(rank_from_launcher_env(), 0);
}

TEST(Session, RefusesABadStartTimeout) {
  SessionOptions o;
  o.kind = LaunchKind::env;
  o.start_timeout_s = 0;
  EXPECT_FALSE(Session::start(o).ok());
}

TEST(Session, AgreesOnlyWhenEveryRankWasGivenTheSameRun) {
  auto s = env_session();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->agree(shape("96")).ok()) << "no transport attached yet";
  auto ranks = std::make_shared<FakeRanks>();
  s->attach(ranks);
  ranks->others = {agreement_message(shape("96"))};
  EXPECT_TRUE(s->agree(shape("96")).ok());
  ranks->others = {agreement_message(shape("128"))};
  const Status st = s->agree(shape("96"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 1 was given --m 128 where rank 0 was given --m 96"),
            std::string::npos)
      << st.error().message;
}

TEST(Session, RankZeroGetsEveryRankCombinedAfterABarrier) {
  auto s = env_session();
  ASSERT_TRUE(s);
  auto ranks = std::make_shared<FakeRanks>();
  s->attach(ranks);
  ranks->other_numbers = {encode_numbers({{2.0, 0.5}, 1e-5, 3.0, 4})};
  const auto c = s->gather_numbers({{1.0, 1.0}, 2e-5, 1.0, 1}, 5.0);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->times_s, (std::vector<double>{2.0, 1.0}));
  EXPECT_EQ((*c)->max_abs_error, 2e-5);
  EXPECT_EQ((*c)->threads, 5);
  EXPECT_EQ(ranks->barriers, 1);
}

TEST(Session, AFailedProcessWaitsForItsPeersNoLongerThanTheStopBound) {
  auto s = env_session();
  ASSERT_TRUE(s);
  auto ranks = std::make_shared<FakeRanks>();
  s->attach(ranks);
  s->leave_after_failure();
  EXPECT_GT(ranks->farewell_timeout_s, 0);
  EXPECT_LE(ranks->farewell_timeout_s + kAnnounceBound_s, 1.0);
  EXPECT_FALSE(s->attached()) << "the transport is dropped";
}

}  // namespace
}  // namespace compass::backends::launch
