// Zero-shot multiple choice and LAMBADA: the lm-eval layouts read from fixtures (tests/data/eval/),
// prompts as lm-eval builds them, and scores that must come out exactly: an oracle model gives
// 100%, the uniform model exactly chance on balanced items, and acc / acc_norm / perplexity equal
// a direct computation from LanguageModel::score.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "data/tokenizer.h"
#include "eval/lm_eval_layouts.h"
#include "eval/loglikelihood_scoring.h"
#include "eval/scoring_requests.h"
#include "tests/testing/error_of.h"
#include "tests/testing/eval_fakes.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/temp_dir.h"

namespace linea::eval {
namespace {

using testing::ByteTokenizer;
using testing::error_of;
using testing::ScriptedModel;

const std::filesystem::path kData = testing::fixture_dir() / "eval";

// The model that knows the answers: log p = 0 for each gold (context, continuation), −50 per token
// otherwise.
ScriptedModel oracle_for(const std::vector<ChoiceItem>& items, const data::Tokenizer& tok) {
  std::map<std::pair<inference::TokenIds, inference::TokenIds>, bool> gold;
  for (const ChoiceItem& item : items) {
    for (size_t i = 0; i < item.continuations.size(); ++i) {
      const auto r = make_score_request(tok, item.contexts[i], item.continuations[i]);
      gold[{r.context, r.continuation}] = int(i) == item.gold;
    }
  }
  return ScriptedModel(
      [gold](const inference::ScoreRequest& r) {
        const bool right = gold.at({r.context, r.continuation});
        return inference::ScoreResult{right ? 0.0 : -50.0 * double(r.continuation.size()), right};
      },
      nullptr);
}

TEST(EvalMultipleChoice, ReadsEveryLmEvalLayoutAsLmEvalBuildsThePrompts) {
  const auto arc = read_multiple_choice_task("arc_challenge", kData);
  ASSERT_EQ(arc.size(), 3u);
  EXPECT_EQ(arc[0].contexts[2],
            "Question: An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most "
            "likely effect of this increase in rotation?\nAnswer:");
  EXPECT_EQ(arc[0].continuations[2], " Planetary days will become shorter.");
  EXPECT_EQ(arc[0].gold, 2);
  EXPECT_EQ(arc[2].gold, 0);  // numeric labels "1".."4"
  EXPECT_EQ(arc[0].norm_bytes[0], double(std::string("Planetary density will decrease.").size()));

  const auto hs = read_multiple_choice_task("hellaswag", kData);
  EXPECT_EQ(hs[0].contexts[0], "Roof shingle removal: A man is sitting on a roof. He");
  EXPECT_EQ(hs[0].continuations[3], " starts pulling up roofing on a roof.");
  EXPECT_EQ(hs[0].gold, 3);
  // [header]/[step] dropped, " [title]" → ". ", double spaces once, ctx_b capitalized (rest lower case)
  EXPECT_EQ(hs[2].contexts[0],
            "Home and Garden: How to grow a lemon tree. Choose a sunny spot. Lemon trees need full sun");
  // (the space before "Water" survives: strip runs before "[step]" is dropped, as in lm-eval)
  EXPECT_EQ(hs[2].continuations[0], "  Water them daily.");
  EXPECT_EQ(hs[2].continuations[2], " in the dark always.");
  EXPECT_EQ(hs[2].continuations[3], " to grow well.");

  const auto piqa = read_multiple_choice_task("piqa", kData);
  EXPECT_EQ(piqa[1].contexts[0], "Question: dresser\nAnswer:");
  EXPECT_EQ(piqa[1].continuations[1], " finish, woodgrain with  bobby pin ");
  EXPECT_EQ(piqa[1].gold, 1);

  const auto wino = read_multiple_choice_task("winogrande", kData);
  EXPECT_EQ(wino[0].contexts[0], "Sarah was a much better surgeon than Maria so Sarah");
  EXPECT_EQ(wino[0].contexts[1], "Sarah was a much better surgeon than Maria so Maria");
  EXPECT_EQ(wino[0].continuations[0], " always got the harder cases.");
  EXPECT_EQ(wino[1].gold, 1);

  const auto obqa = read_multiple_choice_task("openbookqa", kData);
  EXPECT_EQ(obqa[0].contexts[0], "The sun is responsible for");
  EXPECT_EQ(obqa[0].gold, 3);
  EXPECT_EQ(read_multiple_choice_task("arc_easy", kData, 1).size(), 1u);  // --limit

  const auto lambada = read_lambada(kData);
  ASSERT_EQ(lambada.size(), 2u);
  EXPECT_EQ(lambada[0].target, " signs");
  EXPECT_EQ(lambada[1].target, " Shane");
  EXPECT_EQ(lambada[1].context.substr(lambada[1].context.size() - 10), "on my own,");
}

TEST(EvalMultipleChoice, RequestsSplitAsLmEvalDoesAndStartWithTheDocumentToken) {
  ByteTokenizer tok;
  const auto r = make_score_request(tok, "Answer: ", "yes");  // the trailing space joins the continuation
  EXPECT_EQ(r.context, (inference::TokenIds{0, 'A' + 1, 'n' + 1, 's' + 1, 'w' + 1, 'e' + 1, 'r' + 1, ':' + 1}));
  EXPECT_EQ(r.continuation, (inference::TokenIds{' ' + 1, 'y' + 1, 'e' + 1, 's' + 1}));
}

TEST(EvalMultipleChoice, AnOracleScoresEveryTaskAtOneHundredPercent) {
  ByteTokenizer tok;
  for (const std::string& task : multiple_choice_task_names()) {
    const auto items = read_multiple_choice_task(task, kData);
    ScriptedModel oracle = oracle_for(items, tok);
    const TaskResult r = score_multiple_choice(task, items, oracle, tok);
    EXPECT_EQ(r.samples, int64_t(items.size())) << task;
    EXPECT_EQ(r.metrics.at("acc").value, 1.0) << task;
    EXPECT_EQ(r.metrics.at("acc_norm").value, 1.0) << task;
    EXPECT_EQ(r.metrics.at("acc").stderr_, 0.0) << task;
  }
}

TEST(EvalMultipleChoice, TheUniformModelScoresExactlyChanceOnBalancedItems) {
  // Four equally long choices, the gold at each position once per four items, and 12 items: the
  // uniform model ties every choice, picks the first, so it is right on exactly a quarter.
  testing::TempDir dir;
  {
    std::ofstream out(dir / "arc_easy.jsonl");
    for (int i = 0; i < 12; ++i) {
      out << R"({"question": "q)" << i
          << R"(", "choices": {"text": ["red", "tan", "sky", "ash"], "label": ["A", "B", "C", "D"]}, "answerKey": ")"
          << "ABCD"[i % 4] << "\"}\n";
    }
  }
  ByteTokenizer tok;
  testing::UniformModel uniform;
  const TaskResult r =
      score_multiple_choice("arc_easy", read_multiple_choice_task("arc_easy", dir.path()), uniform, tok);
  EXPECT_EQ(r.metrics.at("acc").value, 0.25);
  EXPECT_EQ(r.metrics.at("acc_norm").value, 0.25);
  // sample standard deviation / √n = √(0.25 · 0.75 · 12/11) / √12
  EXPECT_NEAR(r.metrics.at("acc").stderr_, std::sqrt(0.25 * 0.75 * 12.0 / 11.0 / 12.0), 1e-15);
}

TEST(EvalMultipleChoice, AccAndAccNormAgreeWithADirectComputationFromScore) {
  // A model whose log-likelihood depends on the tokens (not on the answers): the per-token value
  // −(id mod 7) / 3. acc picks the highest total, acc_norm the highest total per byte of the choice.
  ByteTokenizer tok;
  ScriptedModel model(
      [](const inference::ScoreRequest& r) {
        double ll = 0;
        for (int32_t id : r.continuation) ll -= double(id % 7) / 3.0;
        return inference::ScoreResult{ll, false};
      },
      nullptr);
  for (const std::string task : {"arc_challenge", "hellaswag", "winogrande"}) {
    const auto items = read_multiple_choice_task(task, kData);
    double acc = 0, acc_norm = 0;
    for (const ChoiceItem& item : items) {
      int best = 0, best_norm = 0;
      std::vector<double> ll;
      for (size_t i = 0; i < item.continuations.size(); ++i) {
        ll.push_back(model.score({make_score_request(tok, item.contexts[i], item.continuations[i])})[0].log_likelihood);
        if (ll[i] > ll[best]) best = int(i);
        if (ll[i] / item.norm_bytes[i] > ll[best_norm] / item.norm_bytes[best_norm]) best_norm = int(i);
      }
      acc += best == item.gold;
      acc_norm += best_norm == item.gold;
    }
    const TaskResult r = score_multiple_choice(task, items, model, tok);
    EXPECT_DOUBLE_EQ(r.metrics.at("acc").value, acc / double(items.size())) << task;
    EXPECT_DOUBLE_EQ(r.metrics.at("acc_norm").value, acc_norm / double(items.size())) << task;
  }
}

TEST(EvalMultipleChoice, LambadaAccuracyIsGreedyAndPerplexityIsExpOfTheMeanNegativeLogLikelihood) {
  ByteTokenizer tok;
  const auto items = read_lambada(kData);
  // The first passage's word greedy with log p = −1, the second not, log p = −3.
  ScriptedModel model(
      [&](const inference::ScoreRequest& r) {
        const bool first = r.continuation == make_score_request(tok, items[0].context, items[0].target).continuation;
        return inference::ScoreResult{first ? -1.0 : -3.0, first};
      },
      nullptr);
  const TaskResult r = score_last_word("lambada_openai", items, model, tok);
  EXPECT_EQ(r.metrics.at("acc").value, 0.5);
  EXPECT_DOUBLE_EQ(r.metrics.at("perplexity").value, std::exp(2.0));
  // stderr of the mean ll: sd(−1, −3) / √2 = √2 / √2 = 1; delta method: e² · 1
  EXPECT_DOUBLE_EQ(r.metrics.at("perplexity").stderr_, std::exp(2.0));
}

TEST(EvalMultipleChoice, ScoresThroughARealTokenizer) {
  const auto tok = data::load_tokenizer(
      {"hf-tokenizer-json", (testing::fixture_dir() / "tokenizer" / "hf_bytelevel.json").string()});
  const auto items = read_multiple_choice_task("piqa", kData);
  ScriptedModel oracle = oracle_for(items, *tok);
  EXPECT_EQ(score_multiple_choice("piqa", items, oracle, *tok).metrics.at("acc").value, 1.0);
  const auto r = make_score_request(*tok, items[0].contexts[0], items[0].continuations[0]);
  EXPECT_EQ(r.context.front(), tok->eos_id());
  std::vector<int32_t> all(r.context.begin() + 1, r.context.end());
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  EXPECT_EQ(tok->decode(all), items[0].contexts[0] + items[0].continuations[0]);
}

TEST(EvalMultipleChoice, MissingAndMalformedFilesNameTheFileLineAndField) {
  testing::TempDir dir;
  EXPECT_NE(error_of([&] { read_multiple_choice_task("piqa", dir.path()); }).find("piqa.jsonl: cannot open"),
            std::string::npos);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("piqa.jsonl",
        "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 0}\n\n{\"goal\": \"g\", \"sol1\": \"a\", "
        "\"label\": 1}\n");
  EXPECT_NE(
      error_of([&] { read_multiple_choice_task("piqa", dir.path()); }).find("piqa.jsonl:3: field \"sol2\": missing"),
      std::string::npos);
  write("piqa.jsonl", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 2}\n");
  EXPECT_NE(error_of([&] {
              read_multiple_choice_task("piqa", dir.path());
            }).find("piqa.jsonl:1: field \"label\": expected the index"),
            std::string::npos);
  write("arc_easy.jsonl",
        "{\"question\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\"]}, \"answerKey\": \"E\"}\n");
  EXPECT_NE(error_of([&] {
              read_multiple_choice_task("arc_easy", dir.path());
            }).find("arc_easy.jsonl:1: field \"answerKey\""),
            std::string::npos);
  write("winogrande.jsonl", "not json\n");
  EXPECT_NE(error_of([&] {
              read_multiple_choice_task("winogrande", dir.path());
            }).find("winogrande.jsonl:1: expected a JSON object"),
            std::string::npos);
  write("hellaswag.jsonl",
        "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", \"endings\": \"x\", \"label\": \"0\"}\n");
  EXPECT_NE(error_of([&] {
              read_multiple_choice_task("hellaswag", dir.path());
            }).find("hellaswag.jsonl:1: field \"endings\": expected a non-empty array"),
            std::string::npos);
  write("lambada_openai.jsonl", "{\"text\": \"oneword\"}\n");
  EXPECT_NE(error_of([&] { read_lambada(dir.path()); }).find("lambada_openai.jsonl:1: field \"text\""),
            std::string::npos);
}

}  // namespace
}  // namespace linea::eval
