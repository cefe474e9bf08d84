#include "data/mqar.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "data/synthetic_rng.h"

namespace linea::data {

void check_mqar_config(const MqarConfig& c, const std::string& source) {
  auto fail = [&](const std::string& key, const std::string& what) {
    throw std::invalid_argument(source + ": mqar " + key + ": " + what);
  };
  if (c.seq_len < 4 || c.seq_len % 2 != 0)
    fail("seq_len", "expected an even length >= 4, got " + std::to_string(c.seq_len));
  if (c.pairs < 1 || 4 * c.pairs > c.seq_len) {
    fail("pairs",
         "expected 1 <= pairs <= seq_len / 4 = " + std::to_string(c.seq_len / 4) + ", got " + std::to_string(c.pairs));
  }
  if (c.vocab < 2 * c.pairs + 2) {
    fail("vocab", "expected at least 2 × pairs + 2 = " + std::to_string(2 * c.pairs + 2) + " ids, got " +
                      std::to_string(c.vocab));
  }
  if (!(c.power_a > 0 && c.power_a <= 1))
    fail("power_a", "expected a number in (0, 1], got " + std::to_string(c.power_a));
}

MqarSequence mqar_sequence(const MqarConfig& c, uint64_t seed, uint64_t index) {
  SyntheticRng rng(seed, index);
  const int64_t half = c.vocab / 2;
  std::vector<int64_t> keys = rng.distinct(half - 1, c.pairs);          // + 1: ids [1, V/2)
  std::vector<int64_t> values = rng.distinct(c.vocab - half, c.pairs);  // + V/2: ids [V/2, V)
  MqarSequence s;
  s.inputs.assign(size_t(c.seq_len), -1);
  s.targets.assign(size_t(c.seq_len), -1);
  for (int64_t i = 0; i < c.pairs; ++i) {
    s.inputs[size_t(2 * i)] = int32_t(keys[size_t(i)] + 1);
    s.inputs[size_t(2 * i + 1)] = int32_t(values[size_t(i)] + half);
  }
  // The query slots: P draws without replacement, each with p(g) ∝ (g + 1)^(a − 1) among those left.
  const int64_t context = 2 * c.pairs, slots = (c.seq_len - context) / 2;
  std::vector<double> weight(static_cast<size_t>(slots));
  for (int64_t g = 0; g < slots; ++g) weight[size_t(g)] = std::pow(double(g + 1), c.power_a - 1);
  double total = 0;
  for (double w : weight) total += w;
  for (int64_t i = 0; i < c.pairs; ++i) {
    double u = rng.unit() * total;
    int64_t g = 0;
    while (g + 1 < slots && (weight[size_t(g)] == 0 || u >= weight[size_t(g)])) {
      u -= weight[size_t(g)];
      ++g;
    }
    while (weight[size_t(g)] == 0) --g;  // rounding at the end of the scan: the last slot left
    total -= weight[size_t(g)];
    weight[size_t(g)] = 0;
    const int64_t at = context + 2 * g;
    s.inputs[size_t(at)] = int32_t(keys[size_t(i)] + 1);
    s.targets[size_t(at)] = int32_t(values[size_t(i)] + half);
    s.query_positions.push_back(at);
  }
  std::sort(s.query_positions.begin(), s.query_positions.end());
  for (int32_t& id : s.inputs) {
    if (id < 0) id = int32_t(rng.below(uint64_t(c.vocab)));
  }
  return s;
}

bool is_mqar_path(const std::string& path) { return path.rfind("mqar:", 0) == 0; }

MqarConfig parse_mqar_path(const std::string& path, int64_t default_seq_len, const std::string& source) {
  MqarConfig c;
  c.seq_len = default_seq_len;
  const std::string where = source + ": data.path \"" + path + "\"";
  std::string rest = path.substr(5);
  size_t start = 0;
  while (start < rest.size()) {
    const size_t comma = std::min(rest.find(',', start), rest.size());
    const std::string item = rest.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(where + ": expected KEY=VALUE items, got \"" + item + "\"");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    try {
      size_t used = 0;
      if (key == "power_a") {
        c.power_a = std::stod(value, &used);
      } else {
        const int64_t n = std::stoll(value, &used);
        if (key == "vocab")
          c.vocab = n;
        else if (key == "seq_len")
          c.seq_len = n;
        else if (key == "pairs")
          c.pairs = n;
        else
          throw std::invalid_argument(where + ": unknown key \"" + key +
                                      "\" (expected vocab, seq_len, pairs, power_a)");
      }
      if (used != value.size()) throw std::out_of_range("trailing text");
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).rfind(where, 0) == 0) throw;
      throw std::invalid_argument(where + ": " + key + ": expected a number, got \"" + value + "\"");
    }
  }
  check_mqar_config(c, where);
  return c;
}

}  // namespace linea::data
