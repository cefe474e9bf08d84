#include "worker/optimizer_shard_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace linea {

int64_t row_numel(const Parameter& p) {
  int64_t n = 1;
  for (size_t d = 1; d < p.shape.size(); ++d) n *= p.shape[d];
  return n;
}

int64_t row_count(const Parameter& p) { return p.shape.empty() ? 1 : p.shape[0]; }

namespace {

// Newton–Schulz work of a 2-D parameter (∝ m·n·min(m, n)); element count otherwise; of the full
// tensor, the same on every TP rank.
double whole_cost(const Parameter& p) {
  const Shape& full = p.full_shape.empty() ? p.shape : p.full_shape;
  const auto numel = static_cast<double>(shape_numel(full));
  if (full.size() != 2) return numel;
  return numel * static_cast<double>(std::min(full[0], full[1]));
}

// A parameter's place in the run of non-whole rows.
struct RunEntry {
  size_t param;
  int64_t start;  // its first element in the run
  int64_t numel;
  int64_t row;  // elements per row
};

// The row boundary of the run nearest to position t (ties: the lower one).
int64_t nearest_row_boundary(const std::vector<RunEntry>& run, int64_t total, int64_t t) {
  if (t <= 0) return 0;
  if (t >= total) return total;
  const auto it = std::upper_bound(run.begin(), run.end(), t, [](int64_t x, const RunEntry& e) { return x < e.start; });
  const RunEntry& e = *std::prev(it);  // e.start <= t < e.start + e.numel
  const int64_t lower = e.start + (t - e.start) / e.row * e.row;
  const int64_t upper = lower + e.row;
  return t - lower <= upper - t ? lower : upper;
}

}  // namespace

OptimizerShardPlan::OptimizerShardPlan(const ParameterSet& params, int ranks,
                                       const std::function<bool(const Parameter&)>& whole) {
  if (ranks < 1) throw std::invalid_argument("OptimizerShardPlan: ranks must be >= 1, got " + std::to_string(ranks));
  const auto& ps = params.params();
  const auto R = static_cast<size_t>(ranks);
  pieces_.resize(R);
  numel_.assign(R, 0);
  whole_numel_.assign(R, 0);
  owner_.assign(ps.size(), -1);

  // 1. Owners of the whole parameters: the costliest first, each to the least loaded rank.
  std::vector<size_t> order;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (whole(ps[i]) && shape_numel(ps[i].shape) > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return whole_cost(ps[a]) > whole_cost(ps[b]); });
  std::vector<double> work(R, 0.0);
  for (size_t i : order) {
    const auto r = static_cast<size_t>(std::min_element(work.begin(), work.end()) - work.begin());
    owner_[i] = static_cast<int>(r);
    work[r] += whole_cost(ps[i]);
    whole_numel_[r] += shape_numel(ps[i].shape);
  }

  // 2. The run of the other parameters' rows, and the water level L: the least level with
  //    Σ_r max(0, L − whole_numel[r]) >= the run's length.
  std::vector<RunEntry> run;
  int64_t total = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t n = shape_numel(ps[i].shape);
    if (owner_[i] >= 0 || n == 0) continue;
    run.push_back({i, total, n, row_numel(ps[i])});
    total += n;
  }
  const auto room_below = [&](int64_t level) {
    int64_t room = 0;
    for (int64_t w : whole_numel_) room += std::max<int64_t>(0, level - w);
    return room;
  };
  int64_t low = 0, high = *std::max_element(whole_numel_.begin(), whole_numel_.end()) + total;
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (room_below(mid) >= total)
      high = mid;
    else
      low = mid + 1;
  }
  const int64_t level = low;

  // 3. Cut the run: rank r's part ends at the row boundary nearest to the room of ranks 0..r.
  std::vector<int64_t> cut(R + 1, 0);
  int64_t room = 0;
  for (size_t r = 0; r < R; ++r) {
    room += std::max<int64_t>(0, level - whole_numel_[r]);
    cut[r + 1] = r + 1 == R ? total : std::max(cut[r], nearest_row_boundary(run, total, room));
  }

  // 4. The pieces, whole ones first, and their places in the chunks.
  for (size_t i = 0; i < ps.size(); ++i) {
    if (owner_[i] < 0) continue;
    const auto r = static_cast<size_t>(owner_[i]);
    const int64_t n = shape_numel(ps[i].shape);
    pieces_[r].push_back({i, 0, row_count(ps[i]), ps[i].offset, n, numel_[r], true});
    numel_[r] += n;
  }
  for (size_t r = 0; r < R; ++r) {
    for (const RunEntry& e : run) {
      const int64_t begin = std::max(cut[r], e.start), end = std::min(cut[r + 1], e.start + e.numel);
      if (begin >= end) continue;
      const int64_t row_begin = (begin - e.start) / e.row, row_end = (end - e.start) / e.row;
      const int64_t n = end - begin;
      pieces_[r].push_back({e.param, row_begin, row_end, ps[e.param].offset + row_begin * e.row, n, numel_[r], false});
      numel_[r] += n;
    }
  }
  chunk_numel_ = *std::max_element(numel_.begin(), numel_.end());
  whole_chunk_numel_ = *std::max_element(whole_numel_.begin(), whole_numel_.end());
}

}  // namespace linea
