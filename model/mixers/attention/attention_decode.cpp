// AttentionLayer's decoding path: a KV cache per sequence. A forward continuing the caches
// projects the new tokens, rotates q and k at their positions in the whole sequences,
// appends k and v to the caches and attends each new query over its cache
// (cpu/attention_decode.h); a prefill from empty caches runs the op itself
// (ops::attention_forward). With a sliding window only the last window − 1 rows are kept, all a
// later token can see.
#include "model/mixers/attention/cpu/attention_decode.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "model/mixers/attention/attention_layer.h"

namespace linea {

namespace {

// One sequence's cache: rows [begin, end) of k and v are live, row `begin` at position `first`.
struct KvRows {
  Tensor k, v;  // [capacity, Hkv·Dh]
  int64_t begin = 0, end = 0, first = 0, seen = 0;

  int64_t live() const { return end - begin; }
  // Appends rows, moving the live ones to a new buffer when they do not fit.
  void append(const Tensor& k_new, const Tensor& v_new) {
    const int64_t n = k_new.dim(0), width = k_new.dim(1);
    if (!k.defined() || end + n > k.dim(0)) {
      const int64_t capacity = std::max<int64_t>(16, 2 * (live() + n));
      Tensor k2 = Tensor::empty({capacity, width}, k_new.dtype()), v2 = Tensor::empty({capacity, width}, k_new.dtype());
      if (live() > 0) {
        k2.slice(0, live()).copy_from(k.slice(begin, end));
        v2.slice(0, live()).copy_from(v.slice(begin, end));
      }
      k = k2;
      v = v2;
      end = live();
      begin = 0;
    }
    k.slice(end, end + n).copy_from(k_new);
    v.slice(end, end + n).copy_from(v_new);
    end += n;
  }
  // Drops all but the last `rows` live rows.
  void keep_last(int64_t rows) {
    const int64_t drop = std::max<int64_t>(0, live() - rows);
    begin += drop;
    first += drop;
  }
};

}  // namespace

struct AttentionLayer::DecodeState final : MixerState {
  std::vector<KvRows> seqs;
  size_t bytes() const override {
    size_t total = 0;
    for (const KvRows& s : seqs) total += s.k.defined() ? 2 * s.live() * s.k.dim(1) * dtype_size(s.k.dtype()) : 0;
    return total;
  }
};

std::unique_ptr<MixerState> AttentionLayer::start_state(int64_t sequences) const {
  auto state = std::make_unique<DecodeState>();
  state->seqs.resize(static_cast<size_t>(sequences));
  return state;
}

Tensor AttentionLayer::forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state_base) {
  DecodeState& state = state_as<DecodeState>(state_base);
  const SeqLayout& seqs = ctx.seqs;
  const int64_t n = x.dim(0), S = seqs.num_seqs();
  if (static_cast<int64_t>(state.seqs.size()) != S || x.device() != Device::cpu) {
    throw std::invalid_argument("AttentionLayer::forward_continuing: a cache of " + std::to_string(state.seqs.size()) +
                                " sequences for " + std::to_string(S) + " (CPU only)");
  }
  const Tensor q = q_proj_.forward(ctx, x), k = k_proj_.forward(ctx, x), v = v_proj_.forward(ctx, x);
  bool fresh = true;
  for (const KvRows& cache : state.seqs) fresh = fresh && cache.seen == 0;
  // ctx.positions are the positions in the whole sequences (Model::logits_continuing).
  ops::rope_apply(q, ctx.positions, shape_.q_heads, config_.rope_theta, /*inverse=*/false);
  ops::rope_apply(k, ctx.positions, shape_.kv_heads, config_.rope_theta, /*inverse=*/false);
  Tensor out = ctx.activation({n, shape_.q_heads * config_.head_dim});
  if (fresh) {
    ops::attention_forward(out, ctx.statistics({n, shape_.q_heads}), q, k, v, shape_, seqs);
  }
  for (int64_t s = 0; s < S; ++s) {
    KvRows& cache = state.seqs[s];
    const int64_t begin = seqs.begin(s), end = seqs.end(s);
    if (end == begin) continue;
    cache.append(k.slice(begin, end), v.slice(begin, end));
    if (!fresh) {
      const auto attend = [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        cpu::attention_over_cache<T>(out.slice(begin, end).data<T>(), q.slice(begin, end).data<T>(), end - begin,
                                     cache.seen, cache.k.slice(cache.begin, cache.end).data<T>(),
                                     cache.v.slice(cache.begin, cache.end).data<T>(), cache.live(), cache.first,
                                     shape_);
      };
      if (out.dtype() == DType::f32) {
        attend(static_cast<float*>(nullptr));
      } else if (out.dtype() == DType::f64) {
        attend(static_cast<double*>(nullptr));
      } else {
        throw std::invalid_argument("AttentionLayer::forward_continuing: f32 or f64 only, got " + out.describe());
      }
    }
    cache.seen += end - begin;
    if (shape_.window > 0) cache.keep_last(shape_.window - 1);
  }
  return o_proj_.forward(ctx, out);
}

}  // namespace linea
