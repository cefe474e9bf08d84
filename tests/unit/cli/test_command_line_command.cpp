// cli::CommandLine, the parser of every `linea` subcommand: options with and without values, lists,
// positional counts, --help, and errors that name the option and the expectation.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "tests/testing/error_of.h"

namespace linea::cli {
namespace {

using testing::error_of;

// A command line like generate's: one positional word, valued options, a flag and a list.
CommandLine example() {
  CommandLine cli("example", "usage: linea example RUN [--count N] [--rate R] [--json] [--tag T ...]\n");
  cli.option({"count", "rate"}).option("mode").flag("json").list("tag").positional(1, 1);
  return cli;
}

CommandLine read(std::vector<std::string> words) {
  CommandLine cli = example();
  cli.read(words);
  return cli;
}

TEST(CommandLine, ReadsOptionsFlagsListsAndPositionalWords) {
  const CommandLine cli =
      read({"--count", "3", "run", "--rate=0.5", "--json", "--tag", "a", "--tag=b", "--count", "4", "--mode="});
  ASSERT_EQ(cli.positional(), std::vector<std::string>{"run"});
  EXPECT_EQ(cli.integer("count", 0, 0, 10), 4);  // the last one counts
  EXPECT_DOUBLE_EQ(cli.number("rate", 1, 0, 1), 0.5);
  EXPECT_TRUE(cli.has("json"));
  EXPECT_EQ(cli.all("tag"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cli.get("mode"), std::string());  // given empty
  EXPECT_FALSE(cli.help());
}

TEST(CommandLine, AbsentOptionsGiveTheirFallbacks) {
  const CommandLine cli = read({"run"});
  EXPECT_FALSE(cli.has("count"));
  EXPECT_FALSE(cli.has("json"));
  EXPECT_EQ(cli.get("count"), std::nullopt);
  EXPECT_EQ(cli.integer("count", 7, 0, 10), 7);
  EXPECT_DOUBLE_EQ(cli.number("rate", 0.25), 0.25);
  EXPECT_EQ(cli.string("mode", "fast"), "fast");
  EXPECT_EQ(cli.choice("mode", "fast", {"fast", "slow"}), "fast");
  EXPECT_TRUE(cli.all("tag").empty());
}

TEST(CommandLine, ValuesThatLookLikeOptionsOrHelpAreValues) {
  const CommandLine cli = read({"run", "--mode", "--help", "--tag", "-h", "--count", "-2"});
  EXPECT_FALSE(cli.help());
  EXPECT_EQ(cli.string("mode", ""), "--help");
  EXPECT_EQ(cli.all("tag"), std::vector<std::string>{"-h"});
  EXPECT_EQ(cli.integer("count", 0), -2);
}

TEST(CommandLine, HelpAnywhereStopsReading) {
  for (const auto& words : std::vector<std::vector<std::string>>{{"--help"}, {"run", "-h"}, {"-h", "--nosuch"}}) {
    CommandLine cli = example();
    cli.read(words);  // no positional-count or unknown-option error after it
    EXPECT_TRUE(cli.help());
  }
}

TEST(CommandLine, MissingValueNamesTheOption) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { read({"run", "--count"}); }), "--count: expected a value after it");
}

TEST(CommandLine, UnknownOptionNamesItAndTheHelp) {
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              read({"run", "--cuont", "3"});
            }),
            "unknown option --cuont (see linea example --help)");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              read({"run", "--cuont=3"});
            }),
            "unknown option --cuont (see linea example --help)");
  CommandLine hinted = example();
  hinted.unknown_option_hint("settings are overrides");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              hinted.read({"--steps", "5"});
            }),
            "unknown option --steps: settings are overrides (see linea example --help)");
}

TEST(CommandLine, FlagTakesNoValue) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { read({"run", "--json=yes"}); }), "--json: takes no value");
}

TEST(CommandLine, BadNumbersNameTheOptionTheRangeAndTheText) {
  const CommandLine cli = read({"run", "--count", "3x", "--rate", "2", "--mode", "1e999"});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { cli.integer("count", 0, 1, 8); }),
            "--count: expected an integer in [1, 8], got \"3x\"");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { cli.number("rate", 0, 0, 1); }),
            "--rate: expected a number in [0, 1], got \"2\"");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { cli.number("rate", 0, -std::numeric_limits<double>::max(), 1.5); }),
            "--rate: expected a number ≤ 1.5, got \"2\"");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { cli.number("mode", 0); }),
            "--mode: expected a number, got \"1e999\"");
  const CommandLine big = read({"run", "--count", "99999999999999999999"});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { big.integer("count", 0); }),
            "--count: expected an integer, got \"99999999999999999999\"");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              read({"run", "--count", "-1"}).integer("count", 0, 0);
            }),
            "--count: expected an integer ≥ 0, got \"-1\"");
}

TEST(CommandLine, ChoiceListsTheChoices) {
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              read({"run", "--mode", "fsat"}).choice("mode", "", {"fast"});
            }),
            "--mode: expected fast, got \"fsat\"");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              read({"run", "--mode", "x"}).choice("mode", "", {"fast", "slow", "off"});
            }),
            "--mode: expected fast, slow or off, got \"x\"");
}

TEST(CommandLine, RequireNamesEveryMissingOption) {
  const CommandLine cli = read({"run", "--rate", "1"});
  EXPECT_NO_THROW(cli.require({"rate"}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              cli.require({"count", "rate", "mode"});
            }),
            "missing --count, --mode (see linea example --help)");
}

TEST(CommandLine, PositionalCountsOutsideTheRangeAreUsageErrors) {
  using UsageError = CommandLine::UsageError;
  EXPECT_EQ(error_of<UsageError>([] { read({}); }), "expected 1 positional argument, got 0");
  EXPECT_EQ(error_of<UsageError>([] { read({"a", "b"}); }), "expected 1 positional argument, got 2");
  const auto with = [](size_t min, size_t max, std::vector<std::string> words) {
    CommandLine cli("example", "");
    cli.positional(min, max).read(words);
    return cli.positional().size();
  };
  EXPECT_EQ(with(0, 0, {}), 0u);
  EXPECT_EQ(with(2, CommandLine::kAny, {"a", "b", "c", "d"}), 4u);
  EXPECT_EQ(with(1, 2, {"a", "b"}), 2u);
  EXPECT_EQ(error_of<UsageError>([&] { with(0, 0, {"stray"}); }), "expected no positional arguments, got \"stray\"");
  EXPECT_EQ(error_of<UsageError>([&] { with(2, CommandLine::kAny, {"a"}); }),
            "expected at least 2 positional arguments, got 1");
  EXPECT_EQ(error_of<UsageError>([&] { with(1, 2, {"a", "b", "c"}); }), "expected 1 to 2 positional arguments, got 3");
}

// parse(argc, argv): the exit codes and where the usage goes.
int parse(CommandLine& cli, std::vector<std::string> words) {
  words.insert(words.begin(), "example");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return cli.parse(static_cast<int>(argv.size()), argv.data()).value_or(-1);
}

TEST(CommandLine, ParsePrintsHelpOnStdoutAndUsageErrorsOnStderr) {
  CommandLine help = example();
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(parse(help, {"--help"}), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), help.usage());

  CommandLine wrong = example();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(parse(wrong, {}), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "linea example: error: expected 1 positional argument, got 0\n\n" + wrong.usage());

  CommandLine fine = example();
  EXPECT_EQ(parse(fine, {"run", "--json"}), -1);  // go on
  CommandLine unknown = example();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(parse(unknown, {"run", "--nosuch"}), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "linea example: error: unknown option --nosuch (see linea example --help)\n\n" + unknown.usage());
}

TEST(CommandLine, UndeclaredNamesAreBugs) {
  const CommandLine cli = read({"run"});
  EXPECT_EQ(error_of<std::logic_error>([&] { cli.has("nosuch"); }), "linea example: --nosuch was not declared");
  EXPECT_EQ(error_of<std::logic_error>([&] { cli.all("count"); }), "linea example: --count is not a list");
}

}  // namespace
}  // namespace linea::cli
