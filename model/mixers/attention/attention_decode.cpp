// AttentionLayer's decoding path: a KV cache per sequence on the layer's device, kept as rings:
// k, v [S, C, Hkv·Dh] hold the rotated key and value of position p of sequence s at row p mod C.
// C covers every key a query of a call sees and the call's new rows: window − 1 + the call's longest
// sequence with a sliding window (window after a prefill from empty caches, which stores only the
// last rows), else the longest sequence so far; a larger C moves the live rows into new rings (C
// grows by an eighth at least without a window, so that steps rarely move the cache).
// A forward continuing the caches projects the new tokens, rotates q and k at their positions in
// the whole sequences, stores the new keys and values a later token may see (those of the last C
// positions of each sequence) and attends each new query over its cache
// (ops::attention_over_cache); a prefill from empty caches runs the op itself
// (ops::attention_forward) and stores afterwards. Rows move by ops::copy_rows.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/mixers/attention/attention_layer.h"
#include "model/row_pairs.h"

namespace linea {

struct AttentionLayer::DecodeState final : MixerState {
  Tensor k, v;                // [S, C, Hkv·Dh]; undefined before the first tokens
  std::vector<int64_t> seen;  // tokens seen of each sequence
  int64_t window = 0, width = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu;

  int64_t sequences() const { return static_cast<int64_t>(seen.size()); }
  int64_t capacity() const { return k.defined() ? k.dim(1) : 0; }
  // The rows of sequence s a later token may see.
  int64_t live(int64_t s) const { return window > 0 ? std::min(seen[s], window - 1) : seen[s]; }
  // The live rows (the rings' spare rows not counted, as decoding_memory's model).
  size_t bytes() const override {
    int64_t rows = 0;
    for (int64_t s = 0; s < sequences(); ++s) rows += live(s);
    return static_cast<size_t>(rows * 2 * width) * dtype_size(dtype);
  }

  // Rings of at least `rows` rows, the live rows moved into them.
  void reserve(int64_t rows) {
    const int64_t old = capacity(), S = sequences();
    if (rows <= old) return;
    const int64_t C = window > 0 ? rows : (rows + rows / 8 + 63) / 64 * 64;
    Tensor k2 = Tensor::empty({S, C, width}, dtype, device), v2 = Tensor::empty({S, C, width}, dtype, device);
    if (k.defined()) {
      RowPairs moves;
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t p = seen[s] - live(s); p < seen[s]; ++p) moves.add(s * C + p % C, s * old + p % old);
      }
      moves.copy(k2.reshape({S * C, width}), k.reshape({S * old, width}));
      moves.copy(v2.reshape({S * C, width}), v.reshape({S * old, width}));
    }
    k = k2;
    v = v2;
  }
};

std::unique_ptr<MixerState> AttentionLayer::start_state(int64_t sequences) const {
  auto state = std::make_unique<DecodeState>();
  state->seen.assign(static_cast<size_t>(sequences), 0);
  state->window = shape_.window;
  state->width = shape_.kv_heads * config_.head_dim;
  state->dtype = k_proj_.weight().compute.dtype();
  state->device = k_proj_.weight().compute.device();
  return state;
}

Tensor AttentionLayer::forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state_base) {
  DecodeState& state = state_as<DecodeState>(state_base);
  const SeqLayout& seqs = ctx.seqs;
  const int64_t n = x.dim(0), S = seqs.num_seqs();
  if (state.sequences() != S) {
    throw std::invalid_argument("AttentionLayer::forward_continuing: a cache of " + std::to_string(state.sequences()) +
                                " sequences for " + std::to_string(S));
  }
  const Tensor q = q_proj_.forward(ctx, x), k = k_proj_.forward(ctx, x), v = v_proj_.forward(ctx, x);
  // ctx.positions are the positions in the whole sequences (Model::logits_continuing).
  ops::rope_apply(q, ctx.positions, shape_.q_heads, config_.rope_theta, /*inverse=*/false);
  ops::rope_apply(k, ctx.positions, shape_.kv_heads, config_.rope_theta, /*inverse=*/false);

  bool fresh = true;
  int64_t longest = 1, longest_after = 1;
  for (int64_t s = 0; s < S; ++s) {
    fresh = fresh && state.seen[s] == 0;
    longest = std::max(longest, seqs.end(s) - seqs.begin(s));
    longest_after = std::max(longest_after, state.seen[s] + seqs.end(s) - seqs.begin(s));
  }
  state.reserve(state.window > 0 ? state.window - 1 + (fresh ? 1 : longest) : longest_after);

  Tensor out = ctx.activation({n, shape_.q_heads * config_.head_dim});
  if (fresh) ops::attention_forward(out, ctx.statistics({n, shape_.q_heads}), q, k, v, shape_, seqs);
  const int64_t C = state.capacity();
  RowPairs stored;
  std::vector<int32_t> queries(fresh ? 0 : static_cast<size_t>(2 * n));  // (sequence, position) per token
  for (int64_t s = 0; s < S; ++s) {
    const int64_t after = state.seen[s] + seqs.end(s) - seqs.begin(s);
    for (int64_t t = seqs.begin(s); t < seqs.end(s); ++t) {
      const int64_t p = state.seen[s] + t - seqs.begin(s);
      if (p + C >= after) stored.add(s * C + p % C, t);
      if (fresh) continue;
      queries[static_cast<size_t>(2 * t)] = static_cast<int32_t>(s);
      queries[static_cast<size_t>(2 * t + 1)] = static_cast<int32_t>(p);
    }
    state.seen[s] = after;
  }
  stored.copy(state.k.reshape({S * C, state.width}), k);
  stored.copy(state.v.reshape({S * C, state.width}), v);
  if (!fresh) {
    ops::attention_over_cache(out, q, state.k, state.v, Tensor::view(queries.data(), {n, 2}, DType::i32), shape_);
  }
  return o_proj_.forward(ctx, out);
}

}  // namespace linea
