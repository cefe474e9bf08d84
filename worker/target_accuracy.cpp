#include "worker/target_accuracy.h"

#include <limits>

namespace linea {

double target_accuracy(Model& model, data::ValidationBatches& val) {
  val.reset();
  data::TokenBatch batch;
  int64_t right = 0, total = 0;
  while (val.next(batch)) {
    std::vector<int64_t> rows;
    for (size_t i = 0; i < batch.targets.size(); ++i) {
      if (batch.targets[i] >= 0) rows.push_back(int64_t(i));
    }
    if (rows.empty()) continue;
    const Tensor ids = Tensor::view(batch.inputs.data(), {int64_t(batch.inputs.size())}, DType::i32);
    const Tensor logits = model.logits(ids, batch.layout, rows);
    const int64_t vocab = logits.dim(1);
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t best = 0;
      for (int64_t v = 1; v < vocab; ++v) {
        const double a = logits.dtype() == DType::f64 ? logits.data<double>()[int64_t(r) * vocab + v]
                                                      : double(logits.data<float>()[int64_t(r) * vocab + v]);
        const double b = logits.dtype() == DType::f64 ? logits.data<double>()[int64_t(r) * vocab + best]
                                                      : double(logits.data<float>()[int64_t(r) * vocab + best]);
        if (a > b) best = v;
      }
      right += best == batch.targets[size_t(rows[r])];
    }
    total += int64_t(rows.size());
  }
  return total ? double(right) / double(total) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace linea
