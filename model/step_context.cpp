#include "model/step_context.h"

namespace linea {

StepContext::StepContext(Arena& activations_arena, Arena& scratch_arena, const SeqLayout& layout, DType type,
                         std::optional<DType> master)
    : activations(activations_arena),
      scratch(scratch_arena),
      seqs(layout),
      dtype(type),
      master_dtype(master.value_or(type)) {
  seqs.validate(seqs.num_tokens());
  std::vector<int32_t> host = seqs.positions();
  positions = activations.alloc({seqs.num_tokens()}, DType::i32);
  positions.copy_from(Tensor::view(host.data(), {seqs.num_tokens()}, DType::i32));
}

}  // namespace linea
