// The MQAR training job of the MQAR tests (tests/unit/test_mqar_training.cpp and
// tests/learning/test_mqar_recall.cpp): a 2-layer model at d_model 128 (2 heads of d_k = d_v = 64),
// vocabulary 64, AdamW at lr 1e-3, 16 sequences of 64 tokens a step, an evaluation every 100 steps,
// on data.path "mqar:vocab=64,pairs=4" (the reduced setting of configs/mqar-gdn-cpu.toml).
#pragma once
#include <cstdint>
#include <string>

namespace linea::testing {

// The run config text: `steps` steps of `mixer`, the run's directory `dir`.
inline std::string mqar_config(const std::string& dir, const std::string& mixer, int64_t steps) {
  return "device = \"cpu\"\n[run]\nname = \"mqar\"\ndir = \"" + dir +
         "\"\n[model]\nd_model = 128\nlayers = 2\nvocab = 64\n" + "mixer = \"" + mixer +
         "\"\ntie_embeddings = true\n[model.linear]\nheads = 2\nd_k = 64\nd_v = 64\n" +
         "[optimizer]\nkind = \"adamw\"\nlr = 1e-3\nweight_decay = 0.1\nwarmup_steps = 2\nlr_min_ratio = 0.1\n" +
         "[train]\nsteps = " + std::to_string(steps) + "\nbatch_seqs = 16\nseq_len = 64\nseed = 1\neval_every = 100\n" +
         "eval_batches = 4\ncheckpoint_every = 100000\n[data]\npath = \"mqar:vocab=64,pairs=4\"\n";
}

}  // namespace linea::testing
