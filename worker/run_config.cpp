#include "worker/run_config.h"

#include <algorithm>

#include "data/config_reader.h"
#include "data/prepare.h"
#include "data/row_filter.h"
#include "eval/evaluation.h"
#include "worker/lr_schedule.h"

namespace linea {

namespace {

OptimizerConfig parse_optimizer(ConfigSection s, const std::string& source) {
  OptimizerConfig c;
  c.kind = parse_optimizer_kind(s.choice("kind", "adamw", {"adamw", "muon"}), s.key_path("kind"));
  c.lr = s.number("lr", c.lr, 0.0, 10.0);
  c.beta1 = s.number("beta1", c.beta1, 0.0, 1.0);
  c.beta2 = s.number("beta2", c.beta2, 0.0, 1.0);
  c.eps = s.number("eps", c.eps, 0.0, 1.0);
  c.weight_decay = s.number("weight_decay", c.weight_decay, 0.0, 10.0);
  c.decay_embeddings = s.boolean("decay_embeddings", c.decay_embeddings);
  c.muon_momentum = s.number("muon_momentum", c.muon_momentum, 0.0, 1.0);
  c.ns_steps = static_cast<int>(s.integer("ns_steps", c.ns_steps, 1, 100));
  c.grad_clip = s.number("grad_clip", c.grad_clip, 0.0);
  c.schedule = parse_lr_schedule_kind(s.choice("schedule", "warmup_cosine", {"warmup_cosine", "constant", "wsd"}),
                                      s.key_path("schedule"));
  c.warmup_steps = s.integer("warmup_steps", c.warmup_steps, 0);
  c.lr_min_ratio = s.number("lr_min_ratio", c.lr_min_ratio, 0.0, 1.0);
  c.wsd_decay_ratio = s.number("wsd_decay_ratio", c.wsd_decay_ratio, 0.0, 1.0);
  if (s.has("zero")) c.zero = s.boolean("zero", true);
  try {
    validate(c);  // checks between fields; its messages name "optimizer.<field>"
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  return c;
}

TrainConfig parse_train(ConfigSection s) {
  TrainConfig c;
  c.steps = s.integer("steps", c.steps, 1);
  c.stop_at = s.integer("stop_at", c.stop_at, 0);
  c.batch_seqs = s.integer("batch_seqs", c.batch_seqs, 1);
  c.micro_batch_seqs = s.integer("micro_batch_seqs", c.micro_batch_seqs, 0);
  if (c.micro_batch_seqs == 0) c.micro_batch_seqs = c.batch_seqs;
  if (c.batch_seqs % c.micro_batch_seqs != 0) {
    s.fail("micro_batch_seqs", "must divide train.batch_seqs = " + std::to_string(c.batch_seqs) + ", got " +
                                   std::to_string(c.micro_batch_seqs));
  }
  c.seq_len = s.integer("seq_len", c.seq_len, 1, int64_t(1) << 24);
  c.seed = static_cast<uint64_t>(s.integer("seed", static_cast<int64_t>(c.seed), 0));
  c.log_every = s.integer("log_every", c.log_every, 1);
  c.eval_every = s.integer("eval_every", c.eval_every, 0);
  c.eval_batches = s.integer("eval_batches", c.eval_batches, 0);
  c.checkpoint_every = s.integer("checkpoint_every", c.checkpoint_every, -1);
  if (c.checkpoint_every < 0 && c.stop_at > 0) {
    s.fail("stop_at", "needs a checkpoint to stop at, but train.checkpoint_every = -1 writes none");
  }
  c.keep_checkpoints = s.integer("keep_checkpoints", c.keep_checkpoints, 1, 1000);
  c.checkpoint_failures_allowed = s.integer("checkpoint_failures_allowed", c.checkpoint_failures_allowed, 0, 1000000);
  const std::string resume = s.choice("resume", "auto", {"auto", "never", "require"});
  c.resume = resume == "auto" ? ResumeMode::auto_resume : resume == "never" ? ResumeMode::never : ResumeMode::require;
  c.threads = s.integer("threads", c.threads, 0, 4096);
  c.precision = s.choice("precision", c.precision, {"auto", "bf16", "f32"});
  return c;
}

DataConfig parse_data(ConfigSection s) {
  DataConfig c;
  c.path = s.string("path", c.path);
  c.vocab_size = s.integer("vocab_size", c.vocab_size, 0);
  c.eos_id = s.integer("eos_id", c.eos_id, -1, INT32_MAX);
  c.verify_checksums = s.boolean("verify_checksums", c.verify_checksums);
  c.document_masking = s.boolean("document_masking", c.document_masking);
  if (c.path.rfind("parquet:", 0) != 0) {
    for (const char* key : {"tokenizer", "val_docs", "text_field", "where", "threads"}) {
      if (s.has(key)) {
        s.fail(key,
               "only for a parquet stream (data.path = \"parquet:GLOB\"); a shard directory's manifest names "
               "its tokenizer and splits");
      }
    }
    return c;
  }
  if (c.path.size() == 8) s.fail("path", "expected \"parquet:GLOB\" with a file or glob after the colon");
  c.tokenizer = s.required_string("tokenizer");
  data::TokenizerChoice choice;
  try {
    choice = data::TokenizerChoice::parse(c.tokenizer, "");
  } catch (const std::invalid_argument& e) {
    s.fail("tokenizer", e.what());
  }
  if (choice.kind == data::TokenizerChoice::Kind::spm_train) {
    s.fail("tokenizer", "a parquet stream needs a trained tokenizer, not spm-train (train one with linea prepare)");
  }
  c.val_docs = s.integer("val_docs", c.val_docs, 0);
  if (c.val_docs < 1) s.fail("val_docs", "expected the number of documents held out for validation (≥ 1)");
  c.text_field = s.string("text_field", c.text_field);
  c.where = s.string("where", c.where);
  try {
    data::RowFilter::parse(c.where.empty() ? std::vector<std::string>{} : std::vector<std::string>{c.where});
  } catch (const std::invalid_argument& e) {
    s.fail("where", e.what());
  }
  c.threads = s.integer("threads", c.threads, 1, 1024);
  return c;
}

ParallelConfig parse_parallel(ConfigSection s) {
  ParallelConfig c;
  c.tp = s.integer("tp", c.tp, 1, 1 << 20);
  c.dp = s.integer("dp", c.dp, 0, 1 << 20);
  c.timeout_s = s.number("timeout_s", c.timeout_s, 0.0, 1e6);
  c.validate = s.boolean("validate", c.validate);
  return c;
}

EvalConfig parse_eval(ConfigSection s) {
  EvalConfig c;
  c.data_dir = s.string("data_dir", c.data_dir);
  c.tasks = s.string_list("tasks", c.tasks);
  try {
    std::string list;
    for (const std::string& t : c.tasks) list += (list.empty() ? "" : ",") + t;
    if (!list.empty()) eval::select_tasks(list, c.data_dir);
  } catch (const std::invalid_argument& e) {
    s.fail("tasks", e.what());
  }
  c.every = s.integer("every", c.every, 0);
  c.limit = s.integer("limit", c.limit, 0);
  c.context_lengths = s.integer_list("context_lengths", c.context_lengths, 64, 1 << 20);
  c.seed = s.integer("seed", c.seed, 0);
  return c;
}

RunConfig parse(ConfigReader reader) {
  RunConfig c;
  c.source = reader.source();
  ConfigSection root = reader.section("");
  c.device = root.choice("device", c.device, {"auto", "cpu", "cuda"});
  ConfigSection run = reader.section("run");
  c.name = run.name("name", c.name);
  if (c.name.empty() || c.name.find('/') != std::string::npos || c.name == "." || c.name == "..") {
    run.fail("name", "expected a non-empty name without '/', got '" + c.name + "'");
  }
  c.dir = run.string("dir", c.dir);
  c.model = ModelConfig::parse(reader.section("model"));
  c.optim = parse_optimizer(reader.section("optimizer"), c.source);
  ConfigSection train = reader.section("train");
  c.train = parse_train(train);
  c.data = parse_data(reader.section("data"));
  c.parallel = parse_parallel(reader.section("parallel"));
  c.eval = parse_eval(reader.section("eval"));
  if (c.device == "cpu" && c.train.precision == "bf16") {
    train.fail("precision", "\"bf16\" needs device = \"cuda\" (or \"auto\" with a GPU); the cpu trains in \"f32\"");
  }
  try {
    LrSchedule(c.optim, c.train.steps);  // checks the schedule against train.steps
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(c.source + ": " + e.what());
  }
  reader.check_unknown_keys();
  c.resolved = reader.resolved();
  return c;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse(ConfigReader::from_file(path, overrides));
}

RunConfig parse_run_config(std::string_view text, const std::string& source,
                           const std::vector<std::string>& overrides) {
  return parse(ConfigReader::from_string(text, source, overrides));
}

}  // namespace linea
