#include "model/mixers/gla/gla_configs.h"

#include <cmath>
#include <string>

#include "data/config_reader.h"

namespace linea {

namespace {

// d_model · ratio / heads when that is a positive integer; else the error names `key`.
int64_t width_per_head(int64_t d_model, double ratio, int64_t heads, std::string_view key,
                       const ConfigFieldError& fail) {
  const double width = double(d_model) * ratio;
  if (!(ratio > 0) || width != std::floor(width) || int64_t(width) % heads != 0) {
    fail(key, "d_model " + std::to_string(d_model) + " × " + std::to_string(ratio) +
                  " must be a positive multiple of heads = " + std::to_string(heads));
  }
  return int64_t(width) / heads;
}

// The q, k, v short convs' kernel size: 0 (none) or a width in [2, 64].
void check_short_conv(const ConfigFieldError& fail, int64_t conv) {
  if (conv != 0 && (conv < 2 || conv > 64)) {
    fail("conv", "expected 0 (no short conv) or a kernel size in [2, 64], got " + std::to_string(conv));
  }
}

void must_be_positive(const ConfigFieldError& fail, std::string_view key, double value) {
  if (!(value > 0) || !std::isfinite(value)) fail(key, "expected a positive number, got " + std::to_string(value));
}

}  // namespace

void HeadWidths::read(ConfigSection& table) {
  heads = table.integer("heads", heads);
  expand_k = table.number("expand_k", expand_k);
  expand_v = table.number("expand_v", expand_v);
}

void HeadWidths::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("heads", heads, 1);
  d_k = width_per_head(d_model, expand_k, heads, "expand_k", fail);
  d_v = width_per_head(d_model, expand_v, heads, "expand_v", fail);
}

void GlaConfig::read(ConfigSection& table) {
  widths.read(table);
  gate_rank = table.integer("gate_rank", gate_rank);
  gate_normalizer = table.number("gate_normalizer", gate_normalizer);
  output_gate = table.boolean("output_gate", output_gate);
  conv = table.integer("conv", conv);
  recompute = table.boolean("recompute", recompute);
}

void GlaConfig::resolve(int64_t d_model, const ConfigFieldError& fail) {
  widths.resolve(d_model, fail);
  fail.at_least("gate_rank", gate_rank, 1);
  must_be_positive(fail, "gate_normalizer", gate_normalizer);
  check_short_conv(fail, conv);
}

void RetNetConfig::read(ConfigSection& table) {
  widths.read(table);
  rope_theta = table.number("rope_theta", rope_theta);
  conv = table.integer("conv", conv);
  recompute = table.boolean("recompute", recompute);
}

void RetNetConfig::resolve(int64_t d_model, const ConfigFieldError& fail) {
  widths.resolve(d_model, fail);
  if (widths.d_k % 2) fail("expand_k", "RoPE needs an even d_k, got " + std::to_string(widths.d_k));
  must_be_positive(fail, "rope_theta", rope_theta);
  check_short_conv(fail, conv);
}

void Hgrn2Config::read(ConfigSection& table) {
  expand_ratio = table.integer("expand_ratio", expand_ratio);
  lower_bound = table.boolean("lower_bound", lower_bound);
  recompute = table.boolean("recompute", recompute);
}

void Hgrn2Config::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("expand_ratio", expand_ratio, 1);
  heads = std::max<int64_t>(1, d_model / expand_ratio);
  if (d_model % heads) {
    fail("expand_ratio", "d_model " + std::to_string(d_model) + " is not divisible by its " + std::to_string(heads) +
                             " heads (d_model / expand_ratio)");
  }
  d_v = d_model / heads;
}

void Mamba2Config::read(ConfigSection& table) {
  expand = table.integer("expand", expand);
  head_dim = table.integer("head_dim", head_dim);
  state_size = table.integer("state_size", state_size);
  conv = table.integer("conv", conv);
  dt_min = table.number("dt_min", dt_min);
  dt_max = table.number("dt_max", dt_max);
  dt_floor = table.number("dt_floor", dt_floor);
  recompute = table.boolean("recompute", recompute);
}

void Mamba2Config::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("expand", expand, 1);
  fail.at_least("head_dim", head_dim, 1);
  fail.at_least("state_size", state_size, 1);
  fail.at_least("conv", conv, 1);
  if (conv > 64) fail("conv", "expected a kernel size in [1, 64], got " + std::to_string(conv));
  inner = expand * d_model;
  if (inner % head_dim) {
    fail("head_dim",
         "expand · d_model = " + std::to_string(inner) + " is not a multiple of head_dim " + std::to_string(head_dim));
  }
  heads = inner / head_dim;
  must_be_positive(fail, "dt_min", dt_min);
  must_be_positive(fail, "dt_floor", dt_floor);
  if (!(dt_max >= dt_min)) fail("dt_max", "expected dt_max ≥ dt_min = " + std::to_string(dt_min));
}

void Rwkv6Config::read(ConfigSection& table) {
  widths.read(table);
  proj_rank = table.integer("proj_rank", proj_rank);
  decay_rank = table.integer("decay_rank", decay_rank);
  recompute = table.boolean("recompute", recompute);
}

void Rwkv6Config::resolve(int64_t d_model, const ConfigFieldError& fail) {
  widths.resolve(d_model, fail);
  fail.at_least("proj_rank", proj_rank, 1);
  fail.at_least("decay_rank", decay_rank, 1);
}

}  // namespace linea
