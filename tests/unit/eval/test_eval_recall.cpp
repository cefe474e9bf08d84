// Synthetic recall: the RULER-style generators (prompts fitted to the context length, the answers
// in them, deterministic by seed), RULER's string-match scoring (an oracle gets exactly 100%, a
// model giving half of the values exactly 50%, silence 0%), the teacher-forced answer_nll and
// answer_greedy (certain: 0 nats and 100%; uniform: ln V and 0%), MQAR scored per query (an oracle
// 100%, "always the first pair's value" exactly 1/pairs; answer_nll 0 certain, ln V uniform), and
// task selection by prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "eval/evaluation.h"
#include "eval/mqar_task.h"
#include "eval/recall_scoring.h"
#include "eval/ruler_tasks.h"
#include "tests/testing/error_of.h"
#include "tests/testing/eval_fakes.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/temp_dir.h"

namespace linea::eval {
namespace {

using testing::error_of;
using testing::ScriptedModel;
using testing::WordTokenizer;

// A model that answers each prompt with the given share of its references (the first ones),
// joined by ", ", and, teacher-forced, is certain of the answers of the first `known` samples
// (log-likelihood 0, greedy) and uniform over the tokenizer's V ids on the others (−n ln V, not
// greedy). The score requests it is given are kept in `seen` when that is given.
ScriptedModel answering(const std::vector<RecallSample>& samples, const data::Tokenizer& tok, double share,
                        size_t known = 0, std::vector<inference::ScoreRequest>* seen = nullptr) {
  std::map<inference::TokenIds, inference::TokenIds> answers;
  std::map<inference::TokenIds, size_t> index;
  const auto requests = generate_requests(samples, tok);
  for (size_t i = 0; i < samples.size(); ++i) {
    std::string text = " ";
    const auto& refs = samples[i].references;
    for (size_t r = 0; r < size_t(double(refs.size()) * share); ++r) text += (r ? ", " : "") + refs[r];
    answers[requests[i].prompt] = tok.encode(text);
    index[requests[i].prompt] = i;
  }
  const double log_v = std::log(double(tok.vocab_size()));
  return ScriptedModel(
      [index, known, log_v, seen](const inference::ScoreRequest& r) {
        if (seen) seen->push_back(r);
        if (index.at(r.context) < known) return inference::ScoreResult{0.0, true};
        return inference::ScoreResult{-double(r.continuation.size()) * log_v, false};
      },
      [answers](const inference::GenerateRequest& r) { return answers.at(r.prompt); });
}

class EvalRecall : public ::testing::Test {
 protected:
  WordTokenizer tok;
  std::vector<VocabularyWord> words = vocabulary_words(tok);
};

TEST_F(EvalRecall, VocabularyWordsAreTheLetterEntries) {
  EXPECT_EQ(words.size(), 3000u);
  EXPECT_EQ(words[0].id, 257);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{words[5].id}), words[5].text);
  // A real tokenizer: every word decodes from its id alone.
  const auto hf = data::load_tokenizer(
      {"hf-tokenizer-json", (testing::fixture_dir() / "tokenizer" / "hf_bytelevel.json").string()});
  const auto hf_words = vocabulary_words(*hf);
  ASSERT_FALSE(hf_words.empty());
  for (const auto& w : hf_words) {
    std::string text = hf->decode(std::vector<int32_t>{w.id});
    if (text[0] == ' ') text.erase(0, 1);
    EXPECT_EQ(text, w.text);
  }
}

TEST_F(EvalRecall, EveryTaskFitsItsContextLengthAndHoldsItsAnswers) {
  for (const std::string& task : ruler_task_names()) {
    if (task == "qa_1" || task == "qa_2") continue;
    for (int64_t length : {1024, 4096}) {
      const RulerSettings s{length, 3, 7, {}};
      const auto samples = generate_ruler_samples(task, s, tok, words);
      ASSERT_EQ(samples.size(), 3u);
      for (const RecallSample& r : samples) {
        const auto tokens = int64_t(tok.encode(r.prompt).size());
        EXPECT_LE(tokens + r.max_tokens, length) << task;
        EXPECT_GT(tokens + r.max_tokens, length * 8 / 10) << task << " " << length;  // filled
        ASSERT_FALSE(r.references.empty());
        if (task != "cwe" && task != "fwe") {  // aggregation answers are the words, present anyway
          for (const auto& ref : r.references) EXPECT_NE(r.prompt.find(ref), std::string::npos) << task << " " << ref;
        }
      }
    }
  }
}

TEST_F(EvalRecall, SamplesAreDeterministicBySeed) {
  const auto a = generate_ruler_samples("niah_multikey_1", {1024, 2, 1, {}}, tok, words);
  const auto b = generate_ruler_samples("niah_multikey_1", {1024, 2, 1, {}}, tok, words);
  const auto c = generate_ruler_samples("niah_multikey_1", {1024, 2, 2, {}}, tok, words);
  EXPECT_EQ(a[0].prompt, b[0].prompt);
  EXPECT_EQ(a[1].references, b[1].references);
  EXPECT_NE(a[0].prompt, c[0].prompt);
  EXPECT_NE(a[0].prompt, a[1].prompt);
}

TEST_F(EvalRecall, ThirtyTwoThousandTokens) {
  const auto s = generate_ruler_samples("niah_single_1", {32768, 1, 3, {}}, tok, words);
  const auto tokens = int64_t(tok.encode(s[0].prompt).size());
  EXPECT_LE(tokens, 32768 - 128);
  EXPECT_GT(tokens, 32000);
}

TEST_F(EvalRecall, StringMatchScoresAsRuler) {
  EXPECT_EQ(string_match("The values are 12 and 34.", {"12", "34", "56", "78"}, StringMatch::all), 0.5);
  EXPECT_EQ(string_match("ABC", {"abc"}, StringMatch::all), 1.0);  // case-insensitive
  EXPECT_EQ(string_match("paris", {"London", "Paris"}, StringMatch::part), 1.0);
  EXPECT_EQ(string_match("rome", {"London", "Paris"}, StringMatch::part), 0.0);
}

TEST_F(EvalRecall, AnOracleScoresOneHundredHalfAnswersFiftyAndSilenceZero) {
  for (const std::string task :
       {"niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_synthetic", "niah_single_3"}) {
    const auto samples = generate_ruler_samples(task, {1024, 4, 11, {}}, tok, words);
    ScriptedModel oracle = answering(samples, tok, 1.0);
    EXPECT_EQ(score_recall(task, 1024, samples, oracle, tok).metrics.at("score").value, 100.0) << task;
    testing::UniformModel silent(tok.vocab_size());
    EXPECT_EQ(score_recall(task, 1024, samples, silent, tok).metrics.at("score").value, 0.0) << task;
  }
  // Four values a sample, two given: exactly 50 under string_match_all.
  const auto samples = generate_ruler_samples("niah_multivalue", {1024, 4, 11, {}}, tok, words);
  ScriptedModel half = answering(samples, tok, 0.5);
  const TaskResult r = score_recall("niah_multivalue", 1024, samples, half, tok);
  EXPECT_EQ(r.metrics.at("score").value, 50.0);
  EXPECT_EQ(r.metrics.at("score").stderr_, 0.0);
  EXPECT_EQ(r.context_length, 1024);
}

TEST_F(EvalRecall, TheAnswerIsTheFirstReferenceOrAllOfThemAfterTheAnswerPrefix) {
  EXPECT_EQ(answer_text({"The numbers are", {"12", "34"}, 128, StringMatch::all}), " 12, 34");
  EXPECT_EQ(answer_text({"Answer:", {"The moon", "the moon"}, 32, StringMatch::part}), " The moon");
  EXPECT_EQ(answer_text({"they are: ", {"ABCDE", "FGHIJ"}, 30, StringMatch::all}), "ABCDE, FGHIJ");
  // The tasks' own answer prefixes: a word (niah), "Answer:" (qa), "they are: " (vt, spaced already).
  const RecallSample values = generate_ruler_samples("niah_multivalue", {1024, 1, 3, {}}, tok, words)[0];
  const auto& v = values.references;
  ASSERT_EQ(v.size(), 4u);
  EXPECT_TRUE(values.prompt.ends_with(" mentioned in the provided text are"));
  EXPECT_EQ(answer_text(values), " " + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3]);
  const RecallSample vt = generate_ruler_samples("vt", {1024, 1, 3, {}}, tok, words)[0];
  const auto& n = vt.references;
  ASSERT_EQ(n.size(), 5u);
  EXPECT_TRUE(vt.prompt.ends_with(", they are: "));
  EXPECT_EQ(answer_text(vt), n[0] + ", " + n[1] + ", " + n[2] + ", " + n[3] + ", " + n[4]);
  const RecallSample qa = generate_ruler_samples("qa_synthetic", {1024, 1, 3, {}}, tok, words)[0];
  EXPECT_EQ(qa.match, StringMatch::part);
  EXPECT_TRUE(qa.prompt.ends_with(" Answer:"));
  EXPECT_EQ(answer_text(qa), " " + qa.references[0]);
}

// answer_nll and answer_greedy: teacher-forced on the generate prompt, the answer tokenized alone;
// a model certain of the answers gives exactly 0 nats and 100%, a uniform one ln V and 0%, one
// that knows half the samples the means (and standard errors) of those.
TEST_F(EvalRecall, AnswerLikelihoodIsTeacherForcedOnTheGeneratePrompt) {
  const double log_v = std::log(double(tok.vocab_size()));
  for (const std::string task : {"niah_multivalue", "vt", "qa_synthetic"}) {
    const auto samples = generate_ruler_samples(task, {1024, 4, 11, {}}, tok, words);
    std::vector<inference::ScoreRequest> seen;
    ScriptedModel oracle = answering(samples, tok, 1.0, samples.size(), &seen);
    const TaskResult right = score_recall(task, 1024, samples, oracle, tok, 3);
    EXPECT_EQ(right.metrics.at("answer_nll").value, 0.0) << task;
    EXPECT_EQ(right.metrics.at("answer_greedy").value, 100.0) << task;
    EXPECT_EQ(right.metrics.at("answer_greedy").stderr_, 0.0) << task;
    const auto requests = generate_requests(samples, tok);
    ASSERT_EQ(seen.size(), samples.size()) << task;
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(seen[i].context, requests[i].prompt) << task;
      EXPECT_EQ(seen[i].continuation, tok.encode(answer_text(samples[i]))) << task;
    }
    // The uniform model's greedy is false (ModelLanguageModel's argmax of equal logits is the first,
    // id 0, the document token, which no answer holds).
    testing::UniformModel uniform(tok.vocab_size());
    const TaskResult chance = score_recall(task, 1024, samples, uniform, tok);
    EXPECT_NEAR(chance.metrics.at("answer_nll").value, log_v, 1e-9) << task;
    EXPECT_NEAR(chance.metrics.at("answer_nll").stderr_, 0.0, 1e-9) << task;
    EXPECT_EQ(chance.metrics.at("answer_greedy").value, 0.0) << task;
  }
  // Two samples of four known: per-sample nll {0, 0, L, L}, L = ln V: mean L/2, sample variance
  // 4 (L/2)² / 3, standard error √(L²/3 / 4) = L / (2√3); greedy {100, 100, 0, 0} likewise.
  const auto samples = generate_ruler_samples("niah_multivalue", {1024, 4, 11, {}}, tok, words);
  ScriptedModel half = answering(samples, tok, 0.5, 2);
  const TaskResult r = score_recall("niah_multivalue", 1024, samples, half, tok);
  EXPECT_NEAR(r.metrics.at("answer_nll").value, log_v / 2, 1e-12);
  EXPECT_NEAR(r.metrics.at("answer_nll").stderr_, log_v / (2 * std::sqrt(3.0)), 1e-12);
  EXPECT_DOUBLE_EQ(r.metrics.at("answer_greedy").value, 50.0);
  EXPECT_NEAR(r.metrics.at("answer_greedy").stderr_, 100 / (2 * std::sqrt(3.0)), 1e-12);
  EXPECT_EQ(r.metrics.at("score").value, 50.0);  // generating half of each sample's values
  // The printed line: the headline "score" first, then the teacher-forced metrics.
  EXPECT_EQ(describe(r),
            "niah_multivalue @1024 (4): score 50.0000 ± 0.0000 answer_nll 4.0443 ± 2.3350 "
            "answer_greedy 50.0000 ± 28.8675");
}

TEST_F(EvalRecall, MqarIsScoredPerQuery) {
  const MqarTaskSettings s{128, 8, 5, 3};
  // The oracle: the token after the first occurrence of the query key (its pair).
  ScriptedModel oracle(
      [](const inference::ScoreRequest& r) {
        const int32_t key = r.context.back();
        const auto first = std::find(r.context.begin(), r.context.end(), key);
        return inference::ScoreResult{0.0, *(first + 1) == r.continuation[0]};
      },
      nullptr);
  const TaskResult right = score_mqar(s, words, oracle);
  EXPECT_EQ(right.metrics.at("acc").value, 1.0);
  EXPECT_EQ(oracle.score_calls, 5 * 8);  // one request per query
  // Always the first pair's value: right on exactly one query in eight (each key is asked once).
  ScriptedModel first_value(
      [](const inference::ScoreRequest& r) {
        return inference::ScoreResult{0.0, r.context[1] == r.continuation[0]};
      },
      nullptr);
  EXPECT_EQ(score_mqar(s, words, first_value).metrics.at("acc").value, 1.0 / 8.0);
  // answer_nll: −log p(value) over queries; 0 for the certain oracle, ln V for the uniform model.
  EXPECT_EQ(right.metrics.at("answer_nll").value, 0.0);
  testing::UniformModel uniform(tok.vocab_size());
  const TaskResult chance = score_mqar(s, words, uniform);
  EXPECT_NEAR(chance.metrics.at("answer_nll").value, std::log(double(tok.vocab_size())), 1e-9);
  EXPECT_EQ(chance.metrics.at("acc").value, 0.0);
}

TEST_F(EvalRecall, TaskNamesSelectByPrefixAndGroup) {
  testing::TempDir dir;
  EXPECT_EQ(select_tasks("niah_single", dir.path()),
            (std::vector<std::string>{"niah_single_1", "niah_single_2", "niah_single_3"}));
  EXPECT_EQ(select_tasks("arc,piqa", dir.path()), (std::vector<std::string>{"arc_challenge", "arc_easy", "piqa"}));
  const auto ruler = select_tasks("ruler", dir.path());
  EXPECT_EQ(ruler.size(), 12u);  // 8 niah, vt, cwe, fwe, qa_synthetic in place of qa_1 / qa_2
  EXPECT_EQ(ruler.back(), "qa_synthetic");
  std::ofstream(dir / "squad.json") << "{}";
  std::ofstream(dir / "hotpotqa.json") << "[]";
  const auto with_files = select_tasks("ruler", dir.path());
  EXPECT_EQ(with_files.size(), 13u);
  EXPECT_EQ(with_files.back(), "qa_2");
  EXPECT_NE(error_of([&] { select_tasks("nosuch", dir.path()); }).find("\"nosuch\" is no task"), std::string::npos);
}

TEST_F(EvalRecall, RulerQaNeedsTheUsersFiles) {
  testing::TempDir dir;
  EXPECT_NE(error_of([&] {
              generate_ruler_samples("qa_1", {1024, 1, 1, dir.path()}, tok, words);
            }).find("squad.json: cannot open"),
            std::string::npos);
  std::ofstream(dir / "hotpotqa.json") << R"([{"question": "q?", "context": []}])";
  EXPECT_NE(error_of([&] {
              generate_ruler_samples("qa_2", {1024, 1, 1, dir.path()}, tok, words);
            }).find("hotpotqa.json: [0]: missing field \"answer\""),
            std::string::npos);
  // A small SQuAD file in its layout: the gold paragraph is in the prompt, the answer is its text.
  std::ofstream(dir / "squad.json") << R"({"data": [{"title": "t", "paragraphs": [
      {"context": "The moon orbits the earth.", "qas": [{"question": "What orbits the earth?", "id": "1",
        "answers": [{"text": "The moon", "answer_start": 0}], "is_impossible": false},
        {"question": "Unanswerable?", "id": "2", "answers": [], "is_impossible": true}]},
      {"context": "Water boils at one hundred degrees.", "qas": []}]}]})";
  const auto samples = generate_ruler_samples("qa_1", {1024, 2, 1, dir.path()}, tok, words);
  EXPECT_NE(samples[0].prompt.find("The moon orbits the earth."), std::string::npos);
  EXPECT_NE(samples[0].prompt.find("Question: What orbits the earth? Answer:"), std::string::npos);
  EXPECT_EQ(samples[0].references, std::vector<std::string>{"The moon"});
  EXPECT_EQ(samples[0].match, StringMatch::part);
}

TEST_F(EvalRecall, RunEvaluationRunsTheSelectedTasksAtEachLength) {
  EvalSettings s;
  s.tasks = "niah_single_1,arc_easy";
  s.limit = 2;
  s.data_dir = testing::fixture_dir() / "eval";
  s.context_lengths = {1024, 2048};
  testing::UniformModel model(tok.vocab_size());
  std::ostringstream log;
  const auto results = run_evaluation(s, model, tok, log);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].task, "niah_single_1");
  EXPECT_EQ(results[1].context_length, 2048);
  EXPECT_EQ(results[2].task, "arc_easy");
  EXPECT_EQ(results[2].samples, 2);
  EXPECT_NE(log.str().find("niah_single_1 @2048 (2): score 0.0000"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace linea::eval
