// bench_gpu_attention: times CUDA causal softmax attention (ops::attention_forward / _backward) in
// bf16 at the shapes of shared/ANCHORS.md (B·T = 32768 tokens, H = 16 query and kv heads, d = 128,
// T = 4096, 16384, 32768) on both CUDA backends (cuDNN's fused attention, autotuned as "cudnn" and
// as "cudnn_heuristics" without autotuning, the default's heuristics' first plan; and the own flash
// kernels), for two layouts: whole sequences (plain causal, as torch SDPA is timed) and documents
// (each sequence packs documents of seeded random lengths in [1, T/4]: document masking). One JSON
// line per (backend, layout, shape): forward ms and forward + backward ms (CUDA-event means; the
// untimed warm-up calls build the plans and autotune them), cuDNN's forward and backward plans
// (engine and knob choices, as the log lines name them),
// beside torch SDPA's figures from shared/ANCHORS.md (time SDPA in the same device call with
// shared/anchors/bench_fla_kernels.py for the ratio), and TFLOP/s with the causal FLOP count
// (forward 2·2·H·d·Σ L²/2 over the documents' lengths L, backward 2.5× that: the 5 matmuls of the
// standard backward; extra recomputation is not counted).
// Then, per backend, whether the backward is bit-reproducible: two backward runs on the same
// inputs, their dq, dk, dv compared bit for bit (JSON line "attention_backward_repeatability").
//
// Usage: bench_gpu_attention [iterations=10]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bench/cuda/gpu_bench.h"
#include "kernels/device_memory.h"
#include "model/mixers/attention/attention.h"
#include "model/mixers/attention/cuda/attention_routing.h"

namespace {

using namespace linea;
using namespace linea::bench;

// shared/ANCHORS.md, softmax attention (torch SDPA, causal, one H200).
struct Anchor {
  int64_t seq_len;
  double torch_forward_ms, torch_total_ms, target_total_ms;
};
constexpr Anchor kAnchors[] = {{4096, 0.88, 3.60, 3.60}, {16384, 3.38, 13.0, 13.0}, {32768, 6.73, 26.0, 26.0}};
constexpr int64_t kTokens = 32768, kHeads = 16, kHeadDim = 128;

struct Backend {
  const char* name;
  ops::AttentionBackend backend;
  bool autotune;  // cuDNN autotuning (AttentionShape::cudnn_autotune)
};
constexpr Backend kBackends[] = {{"cudnn", ops::AttentionBackend::cudnn, true},
                                 {"cudnn_heuristics", ops::AttentionBackend::cudnn, false},
                                 {"own", ops::AttentionBackend::own, true}};

// `batch` sequences of seq_len tokens, each cut into documents of lengths uniform in [1, seq_len/4].
SeqLayout documents(int64_t batch, int64_t seq_len, Rng& rng) {
  SeqLayout seqs;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t end = (b + 1) * seq_len;
    for (int64_t t = b * seq_len; t < end;) {
      t = std::min(end, t + 1 + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(seq_len / 4)));
      seqs.cu_seqlens.push_back(t);
    }
  }
  return seqs;
}

// Σ L²/2 over the sequences: the causal score count.
double causal_pairs(const SeqLayout& seqs) {
  double pairs = 0;
  for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
    const double n = static_cast<double>(seqs.end(i) - seqs.begin(i));
    pairs += n * n / 2.0;
  }
  return pairs;
}

struct Problem {
  Tensor q, k, v, dout, out, lse, dq, dk, dv;
  explicit Problem(Rng& rng)
      : q(random_device({kTokens, kHeads * kHeadDim}, DType::bf16, rng)),
        k(random_device({kTokens, kHeads * kHeadDim}, DType::bf16, rng)),
        v(random_device({kTokens, kHeads * kHeadDim}, DType::bf16, rng)),
        dout(random_device({kTokens, kHeads * kHeadDim}, DType::bf16, rng)),
        out(Tensor::empty(q.shape(), DType::bf16, Device::cuda)),
        lse(Tensor::empty({kTokens, kHeads}, DType::f32, Device::cuda)),
        dq(Tensor::empty(q.shape(), DType::bf16, Device::cuda)),
        dk(Tensor::empty(q.shape(), DType::bf16, Device::cuda)),
        dv(Tensor::empty(q.shape(), DType::bf16, Device::cuda)) {}
  void forward(const ops::AttentionShape& shape, const SeqLayout& seqs) {
    ops::attention_forward(out, lse, q, k, v, shape, seqs);
  }
  void backward(const ops::AttentionShape& shape, const SeqLayout& seqs) {
    ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs);
  }
};

ops::AttentionShape shape_for(const Backend& backend) {
  return {.q_heads = kHeads,
          .kv_heads = kHeads,
          .head_dim = kHeadDim,
          .window = 0,
          .scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim)),
          .backend = backend.backend,
          .cudnn_autotune = backend.autotune};
}

void bench_shape(Problem& p, const Backend& backend, const Anchor& anchor, const char* layout, const SeqLayout& seqs,
                 int iterations) {
  const ops::AttentionShape shape = shape_for(backend);
  nlohmann::json line = {{"op", "attention_causal"},
                         {"backend", backend.name},
                         {"layout", layout},
                         {"dtype", "bf16"},
                         {"batch", kTokens / anchor.seq_len},
                         {"seq_len", anchor.seq_len},
                         {"documents", seqs.num_seqs()},
                         {"heads", kHeads},
                         {"head_dim", kHeadDim}};
  try {
    const double forward_ms = mean_ms(iterations, [&] { p.forward(shape, seqs); });
    const std::string forward_plan = cuda::last_attention_route().plan;
    const double total_ms = mean_ms(iterations, [&] {
      p.forward(shape, seqs);
      p.backward(shape, seqs);
    });
    if (backend.backend == ops::AttentionBackend::cudnn) {
      line.update({{"cudnn_forward_plan", forward_plan}, {"cudnn_backward_plan", cuda::last_attention_route().plan}});
    }
    const double forward_flop = 2.0 * 2.0 * kHeads * kHeadDim * causal_pairs(seqs);
    line.update({{"forward_ms", forward_ms},
                 {"forward_backward_ms", total_ms},
                 {"backward_ms", total_ms - forward_ms},
                 {"forward_tflops", tflops(forward_flop, forward_ms)},
                 {"forward_backward_tflops", tflops(3.5 * forward_flop, total_ms)},
                 {"anchor_torch_sdpa_forward_ms", anchor.torch_forward_ms},
                 {"anchor_torch_sdpa_forward_backward_ms", anchor.torch_total_ms},
                 {"target_forward_backward_ms", anchor.target_total_ms},
                 {"vs_target", total_ms / anchor.target_total_ms}});
  } catch (const std::exception& e) {
    line["error"] = e.what();
  }
  emit(line);
}

// Two backward runs on the same inputs: are dq, dk, dv the same bits?
void bench_repeatability(Problem& p, const Backend& backend, const SeqLayout& seqs) {
  const ops::AttentionShape shape = shape_for(backend);
  nlohmann::json line = {{"op", "attention_backward_repeatability"},
                         {"backend", backend.name},
                         {"tokens", seqs.num_tokens()},
                         {"documents", seqs.num_seqs()}};
  try {
    p.forward(shape, seqs);
    p.backward(shape, seqs);
    const Tensor dq = p.dq.clone(), dk = p.dk.clone(), dv = p.dv.clone();
    p.backward(shape, seqs);
    const Tensor dq2 = p.dq.clone(), dk2 = p.dk.clone(), dv2 = p.dv.clone();
    const auto same = [](const Tensor& a, const Tensor& b) { return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0; };
    line.update({{"dq_identical", same(dq, dq2)}, {"dk_identical", same(dk, dk2)}, {"dv_identical", same(dv, dv2)}});
  } catch (const std::exception& e) {
    line["error"] = e.what();
  }
  emit(line);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!cuda_device_available()) throw std::runtime_error("bench_gpu_attention: no CUDA device");
    const int iterations = static_cast<int>(positive_arg("bench_gpu_attention", argc, argv, 1, 10));
    Rng rng(1);
    emit_device();
    Problem p(rng);
    for (const Anchor& anchor : kAnchors) {
      const int64_t batch = kTokens / anchor.seq_len;
      const SeqLayout whole = SeqLayout::uniform(batch, anchor.seq_len);
      Rng layout_rng(static_cast<uint64_t>(anchor.seq_len));
      const SeqLayout docs = documents(batch, anchor.seq_len, layout_rng);
      for (const Backend& backend : kBackends) {
        bench_shape(p, backend, anchor, "causal", whole, iterations);
        bench_shape(p, backend, anchor, "documents", docs, iterations);
      }
    }
    Rng layout_rng(4096);
    const SeqLayout docs = documents(8, 4096, layout_rng);
    for (const Backend& backend : kBackends) {
      bench_repeatability(p, backend, SeqLayout::uniform(8, 4096));
      bench_repeatability(p, backend, docs);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
