#include "model/mixers/hgrn/hgrn_problem.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/mixer_problem_file.h"
#include "model/mixers/hgrn/hgrn.h"

namespace linea {

namespace {

constexpr const char* kHelp =
    R"(  --mixer  hgrn      h_t = exp(g_t) ⊙ h_{t−1} + x_t, o_t = h_t, one state per channel
  --impl   recurrent (f64), chunked (f32), or cuda: the chunked scan on the GPU
           (model/mixers/hgrn/cuda/hgrn.h) with x and do in --dtype, g, h0 and dht in f32
  --dtype  f32 (default) or bf16: the GPU operands' dtype; only with --impl cuda

IN: f32 datasets x, g (log decay ≤ 0) [B, T, D]; optional cu_seqlens (B = 1), h0 [B, D] ([S, D]
  when packed), do [B, T, D], dht like h0.
OUT: o [B, T, D], ht, dx, dg, dh0.
)";

class HgrnProblemFormat final : public MixerProblemFormat {
 public:
  std::string_view help() const override { return kHelp; }

  MixerRun run(const std::filesystem::path& path, std::string_view mixer, MixerImpl impl,
               DType gpu_dtype) const override {
    const DType compute = impl == MixerImpl::recurrent ? DType::f64 : DType::f32;
    const MixerProblemFile file(path, std::string(mixer));
    const Shape x = file.require_leading("x", 3, "[B, T, D]");
    const int64_t b = x[0], t = x[1], d = x[2], n = b * t;
    bool packed = false;
    const SeqLayout seqs = file.sequences("x", x, packed);
    const int64_t s = seqs.num_seqs();
    const std::string state_layout = packed ? "[S, D], S from cu_seqlens" : "[B, D]";
    for (const DatasetRule& rule : {DatasetRule{"g", Presence::required, {b, t, d}, "[B, T, D]"},
                                    DatasetRule{"h0", Presence::optional, {s, d}, state_layout},
                                    DatasetRule{"do", Presence::optional, {b, t, d}, "[B, T, D]"},
                                    DatasetRule{"dht", Presence::optional, {s, d}, state_layout}}) {
      file.check(rule);
    }
    ops::HgrnInputs in{file.read("x", compute, {n, d}), file.read("g", compute, {n, d}, true), Tensor()};
    if (file.has("h0")) in.h0 = file.read("h0", compute, {s, d});

    Tensor d_o = file.has("do") ? file.read("do", compute, {n, d}) : Tensor::zeros({n, d}, compute);
    Tensor dht = file.has("dht") ? file.read("dht", compute, {s, d}) : Tensor();
    const bool gpu = impl == MixerImpl::cuda;
    const Device device = gpu ? Device::cuda : Device::cpu;
    const DType operand = gpu ? gpu_dtype : compute, state = gpu ? DType::f32 : compute;
    if (gpu) {  // x and do in --dtype; g and the states in f32
      for (Tensor* t : {&in.x, &d_o}) *t = to_gpu(*t, operand);
      for (Tensor* t : {&in.g, &in.h0, &dht}) *t = to_gpu(*t, state);
    }

    const ops::HgrnImpl op_impl = impl == MixerImpl::recurrent ? ops::HgrnImpl::recurrent : ops::HgrnImpl::chunked;
    Tensor o = Tensor::empty({n, d}, operand, device), ht = Tensor::empty({s, d}, state, device);
    ops::hgrn_forward(op_impl, seqs, in, o, ht);
    ops::HgrnGrads grads{Tensor::empty({n, d}, operand, device), Tensor::empty({n, d}, state, device),
                         Tensor::empty({s, d}, state, device)};
    ops::hgrn_backward(op_impl, seqs, in, d_o, dht, grads);

    MixerRun run;
    run.datasets = {{"o", tokens_to_batch(o, b, t)},
                    {"ht", host_f32(ht)},
                    {"dx", tokens_to_batch(grads.dx, b, t)},
                    {"dg", tokens_to_batch(grads.dg, b, t)},
                    {"dh0", host_f32(grads.dh0)}};
    run.shape = "B=" + std::to_string(b) + " T=" + std::to_string(t) + " D=" + std::to_string(d) + ", " +
                std::to_string(s) + " sequences";
    return run;
  }
};

}  // namespace

const MixerProblemFormat& hgrn_problem_format() {
  static const HgrnProblemFormat format;
  return format;
}

}  // namespace linea
