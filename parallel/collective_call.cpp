#include "parallel/collective_call.h"

namespace linea {

std::string_view reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "avg"; }

std::string_view collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
    case CollectiveKind::barrier: return "barrier";
  }
  return "?";
}

std::string CollectiveCall::describe() const {
  std::string text(collective_kind_name(kind));
  if (kind == CollectiveKind::barrier) return text + "()";
  text += "(" + std::string(dtype_name(dtype)) + " × " + std::to_string(count);
  switch (kind) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::reduce_scatter: text += ", " + std::string(reduce_op_name(op)); break;
    case CollectiveKind::broadcast: text += ", root " + std::to_string(peer); break;
    case CollectiveKind::send: text += ", to rank " + std::to_string(peer); break;
    case CollectiveKind::recv: text += ", from rank " + std::to_string(peer); break;
    case CollectiveKind::all_gather:
    case CollectiveKind::barrier: break;
  }
  return text + ")";
}

}  // namespace linea
