// MpiCommunicator under mpirun (2 and 4 ranks): every collective against values computed here from
// a formula or from the gathered inputs, the deterministic reduction (bit-identical on all ranks,
// equal to the documented rank-order f64 sum, unchanged by piece size and across repeats), argument
// errors, MPI errors as exceptions, mismatched calls reported on every rank, and a timeout instead
// of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/random.h"
#include "parallel/collective_check.h"
#include "parallel/mpi_comm.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

CommunicatorOptions test_options(int64_t max_piece_bytes = int64_t{64} << 20) {
  CommunicatorOptions options;
  options.validate = true;
  options.timeout = 30s;
  options.max_piece_bytes = max_piece_bytes;
  return options;
}

std::unique_ptr<MpiCommunicator> world(CommunicatorOptions options = test_options()) {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, "world", options);
}

double get(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::f64: return t.data<double>()[i];
    case DType::bf16: return static_cast<float>(t.data<bf16>()[i]);
    case DType::i32: return t.data<int32_t>()[i];
    case DType::i64: return static_cast<double>(t.data<int64_t>()[i]);
  }
  return 0;
}

void set(const Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::f64: t.data<double>()[i] = v; break;
    case DType::bf16: t.data<bf16>()[i] = bf16(static_cast<float>(v)); break;
    case DType::i32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::i64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
  }
}

bool is_floating(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::bf16; }

// Rank r's element i: small multiples of 1/4 (integers for integer types), so that sums and means
// over 2 or 4 ranks are exact in every dtype, bf16 included.
double contribution(int rank, int64_t i, DType dtype) {
  const double v = (rank + 1) * (i % 7 + 1) - 3 * (i % 3);
  return is_floating(dtype) ? v * 0.25 : v;
}

Tensor filled(int64_t n, DType dtype, int rank, int64_t index_offset = 0) {
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) set(t, i, contribution(rank, i + index_offset, dtype));
  return t;
}

double sum_over_ranks(int size, int64_t i, DType dtype) {
  double s = 0;
  for (int r = 0; r < size; ++r) s += contribution(r, i, dtype);
  return s;
}

const DType kAllDtypes[] = {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64};
const int64_t kSizes[] = {0, 1, 3, 1000, 4099};

TEST(MpiCommunicator, AllReduceSumAndAvgInEveryDtype) {
  for (int64_t piece_bytes : {int64_t{64} << 20, int64_t{64}}) {  // one piece, and many small ones
    auto comm = world(test_options(piece_bytes));
    for (DType dtype : kAllDtypes) {
      for (int64_t n : kSizes) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
          if (op == ReduceOp::avg && !is_floating(dtype)) continue;
          Tensor x = filled(n, dtype, comm->rank());
          comm->all_reduce(x, op);
          for (int64_t i = 0; i < n; ++i) {
            const double expected = sum_over_ranks(comm->size(), i, dtype) / (op == ReduceOp::avg ? comm->size() : 1);
            ASSERT_EQ(get(x, i), expected) << dtype_name(dtype) << " n=" << n << " " << reduce_op_name(op) << " i=" << i
                                           << " pieces of " << piece_bytes << " bytes";
          }
        }
      }
    }
  }
}

// Every rank's copy of x, as bytes, so that rank-to-rank comparisons can be made.
std::vector<unsigned char> gather_bytes(Communicator& comm, const Tensor& x) {
  Tensor all = Tensor::empty({comm.size() * x.numel()}, x.dtype());
  comm.all_gather(x, all);
  std::vector<unsigned char> bytes(all.nbytes());
  std::memcpy(bytes.data(), all.raw(), all.nbytes());
  return bytes;
}

template <class T>
void check_rank_order_sum_and_bit_identity() {
  constexpr int64_t n = 30011;
  auto comm = world();
  Rng rng(1000 + static_cast<uint64_t>(comm->rank()));
  Tensor input = Tensor::empty({n}, dtype_of<T>());
  fill_normal(input, rng, 0.0, 1.0);
  // Large values next to small ones, so that the f64 sum of f64 inputs depends on the order.
  for (int64_t i = 0; i < n; i += 97) input.data<T>()[i] *= static_cast<T>(1e17);
  Tensor inputs = Tensor::empty({comm->size() * n}, dtype_of<T>());
  comm->all_gather(input, inputs);

  // The documented result: the f64 sum in rank order, rounded once to T.
  std::vector<T> expected(n);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int r = 0; r < comm->size(); ++r) s += inputs.data<T>()[r * n + i];
    expected[static_cast<size_t>(i)] = static_cast<T>(s);
  }

  std::vector<unsigned char> first_bytes;
  for (int64_t piece_bytes : {int64_t{64} << 20, int64_t{4096}, int64_t{24}}) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto c = world(test_options(piece_bytes));
      Tensor x = input.clone();
      c->all_reduce(x, ReduceOp::sum);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&x.data<T>()[i], &expected[static_cast<size_t>(i)], sizeof(T)), 0)
            << "i=" << i << " got " << x.data<T>()[i] << " expected " << expected[static_cast<size_t>(i)];
      }
      const std::vector<unsigned char> bytes = gather_bytes(*c, x);
      for (int r = 1; r < c->size(); ++r) {
        ASSERT_EQ(std::memcmp(&bytes[r * x.nbytes()], bytes.data(), x.nbytes()), 0) << "rank " << r << " differs";
      }
      if (first_bytes.empty()) first_bytes = bytes;
      ASSERT_EQ(bytes, first_bytes) << "differs from the first run (pieces of " << piece_bytes << " bytes)";
    }
  }
}

TEST(MpiCommunicator, AllReduceIsTheRankOrderSumAndBitIdentical) {
  check_rank_order_sum_and_bit_identity<float>();
  check_rank_order_sum_and_bit_identity<double>();
}

TEST(MpiCommunicator, ReduceScatterOutOfPlaceAndInPlace) {
  for (int64_t piece_bytes : {int64_t{64} << 20, int64_t{40}}) {
    auto comm = world(test_options(piece_bytes));
    const int R = comm->size();
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000}}) {
        for (bool in_place : {false, true}) {
          const ReduceOp op = is_floating(dtype) ? ReduceOp::avg : ReduceOp::sum;
          Tensor input = filled(R * m, dtype, comm->rank());
          Tensor output = in_place ? input.slice(comm->rank() * m, (comm->rank() + 1) * m) : Tensor::empty({m}, dtype);
          comm->reduce_scatter(input, output, op);
          for (int64_t i = 0; i < m; ++i) {
            const double expected = sum_over_ranks(R, comm->rank() * m + i, dtype) / (op == ReduceOp::avg ? R : 1);
            ASSERT_EQ(get(output, i), expected) << dtype_name(dtype) << " m=" << m << " in_place=" << in_place;
          }
        }
      }
    }
  }
}

TEST(MpiCommunicator, AllGatherOutOfPlaceAndInPlace) {
  auto comm = world();
  const int R = comm->size();
  for (DType dtype : kAllDtypes) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}}) {
      for (bool in_place : {false, true}) {
        Tensor output = Tensor::zeros({R * n}, dtype);
        Tensor input = in_place ? output.slice(comm->rank() * n, (comm->rank() + 1) * n) : Tensor::empty({n}, dtype);
        for (int64_t i = 0; i < n; ++i) set(input, i, contribution(comm->rank(), i, dtype));
        comm->all_gather(input, output);
        for (int r = 0; r < R; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(get(output, r * n + i), contribution(r, i, dtype))
                << dtype_name(dtype) << " n=" << n << " rank " << r << " in_place=" << in_place;
          }
        }
      }
    }
  }
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
  auto comm = world(test_options(256));  // several pieces
  for (int root = 0; root < comm->size(); ++root) {
    for (DType dtype : kAllDtypes) {
      Tensor x = filled(1001, dtype, comm->rank());
      comm->broadcast(x, root);
      for (int64_t i = 0; i < x.numel(); ++i) {
        ASSERT_EQ(get(x, i), contribution(root, i, dtype)) << dtype_name(dtype) << " root " << root;
      }
    }
  }
}

TEST(MpiCommunicator, SendRecvAroundARing) {
  auto comm = world(test_options(1024));
  const int R = comm->size(), me = comm->rank();
  const int next = (me + 1) % R, previous = (me + R - 1) % R;
  for (DType dtype : {DType::f32, DType::bf16, DType::i32}) {
    Tensor mine = filled(3000, dtype, me);
    Tensor received = Tensor::zeros({3000}, dtype);
    if (me % 2 == 0) {  // even ranks send first, so the ring cannot deadlock
      comm->send(mine, next);
      comm->recv(received, previous);
    } else {
      comm->recv(received, previous);
      comm->send(mine, next);
    }
    for (int64_t i = 0; i < received.numel(); ++i) {
      ASSERT_EQ(get(received, i), contribution(previous, i, dtype)) << dtype_name(dtype);
    }
  }
}

TEST(MpiCommunicator, BarrierWaitsForTheLastRank) {
  auto comm = world();
  comm->barrier();
  const auto start = std::chrono::steady_clock::now();
  if (comm->rank() == comm->size() - 1) std::this_thread::sleep_for(300ms);
  comm->barrier();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 290ms);
}

TEST(MpiCommunicator, RejectsBadArgumentsOnTheCallingRank) {
  auto comm = world();
  const int R = comm->size();
  Tensor x = Tensor::zeros({8}, DType::f32);
  EXPECT_THROW(
      comm->reduce_scatter(Tensor::zeros({R * 4 + 1}, DType::f32), Tensor::zeros({4}, DType::f32), ReduceOp::sum),
      std::invalid_argument);
  EXPECT_THROW(comm->reduce_scatter(Tensor::zeros({R * 4}, DType::f32), Tensor::zeros({4}, DType::f64), ReduceOp::sum),
               std::invalid_argument);
  EXPECT_THROW(comm->all_gather(x, Tensor::zeros({8 * R + 1}, DType::f32)), std::invalid_argument);
  EXPECT_THROW(comm->all_reduce(Tensor::zeros({4}, DType::i32), ReduceOp::avg), std::invalid_argument);
  EXPECT_THROW(comm->broadcast(x, R), std::invalid_argument);
  EXPECT_THROW(comm->broadcast(x, -1), std::invalid_argument);
  EXPECT_THROW(comm->send(x, comm->rank()), std::invalid_argument);
  EXPECT_THROW(comm->recv(x, R), std::invalid_argument);
  EXPECT_THROW(comm->all_reduce(Tensor(), ReduceOp::sum), std::invalid_argument);
  EXPECT_THROW(comm->all_reduce(Tensor::view(x.raw(), {8}, DType::f32, Device::cuda), ReduceOp::sum),
               std::invalid_argument);
  // Overlapping buffers are only allowed in the in-place layout.
  Tensor whole = Tensor::zeros({R * 4}, DType::f32);
  const int other = (comm->rank() + 1) % R;
  EXPECT_THROW(comm->all_gather(whole.slice(other * 4, other * 4 + 4), whole), std::invalid_argument);
  EXPECT_THROW(comm->reduce_scatter(whole, whole.slice(other * 4, other * 4 + 4), ReduceOp::sum),
               std::invalid_argument);
  try {
    comm->broadcast(x, R);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("root " + std::to_string(R) + " is outside"), std::string::npos) << e.what();
  }
  // Nothing was sent: the communicator still works.
  Tensor y = filled(5, DType::f32, comm->rank());
  comm->all_reduce(y, ReduceOp::sum);
  EXPECT_EQ(get(y, 4), sum_over_ranks(R, 4, DType::f32));
}

// Runs `call`; expects CollectiveMismatch and returns its message.
template <class Call>
std::string mismatch_message(Call&& call) {
  try {
    call();
  } catch (const CollectiveMismatch& e) {
    return e.what();
  }
  ADD_FAILURE() << "no CollectiveMismatch";
  return {};
}

TEST(MpiCommunicator, MismatchedCallsFailOnEveryRank) {
  auto comm = world();
  const int me = comm->rank();
  // Different sizes.
  std::string message =
      mismatch_message([&] { comm->all_reduce(Tensor::zeros({me == 0 ? 8 : 9}, DType::f32), ReduceOp::sum); });
  EXPECT_NE(message.find("rank 0 call #0 all_reduce(f32 × 8, sum)"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 call #0 all_reduce(f32 × 9, sum)"), std::string::npos) << message;
  // Different dtypes.
  message =
      mismatch_message([&] { comm->all_reduce(Tensor::zeros({4}, me == 1 ? DType::f64 : DType::f32), ReduceOp::sum); });
  EXPECT_NE(message.find("all_reduce(f64 × 4, sum)"), std::string::npos) << message;
  // Different operations.
  Tensor x = Tensor::zeros({4}, DType::f32);
  message = mismatch_message([&] {
    if (me == 0) {
      comm->broadcast(x, 0);
    } else {
      comm->all_reduce(x, ReduceOp::avg);
    }
  });
  EXPECT_NE(message.find("broadcast(f32 × 4, root 0)"), std::string::npos) << message;
  // Different roots.
  message = mismatch_message([&] { comm->broadcast(x, me == 0 ? 0 : 1); });
  EXPECT_NE(message.find("root 1"), std::string::npos) << message;
  // A send and a receive that do not pair up: both ends report it, the other ranks are not involved.
  if (me < 2) {
    message = mismatch_message([&] {
      if (me == 0) {
        comm->send(Tensor::zeros({4}, DType::f32), 1);
      } else {
        comm->recv(Tensor::zeros({5}, DType::f32), 0);
      }
    });
    EXPECT_NE(message.find("send(f32 × 4, to rank 1)"), std::string::npos) << message;
    EXPECT_NE(message.find("recv(f32 × 5, from rank 0)"), std::string::npos) << message;
  }
  // No operation ran, so the communicator is still in step on every rank.
  Tensor y = filled(10, DType::f32, me);
  comm->all_reduce(y, ReduceOp::sum);
  EXPECT_EQ(get(y, 9), sum_over_ranks(comm->size(), 9, DType::f32));
}

TEST(MpiCommunicator, MissingRankGivesATimeoutNotAHang) {
  CommunicatorOptions options = test_options();
  options.validate = false;
  options.timeout = 500ms;
  auto comm = world(options);
  if (comm->rank() == 0) {
    // Rank 0 "fails" before the barrier and joins only after the others have given up, so that
    // their abandoned barrier completes before MPI is finalised.
    std::this_thread::sleep_for(1500ms);
    comm->barrier();
    return;
  }
  try {
    comm->barrier();
    ADD_FAILURE() << "the barrier returned although rank 0 never came";
  } catch (const CommunicationTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("barrier: not complete after 500 ms"), std::string::npos) << e.what();
  }
  // The communicator is now out of step: it refuses further work rather than mixing calls up.
  try {
    comm->all_reduce(Tensor::zeros({2}, DType::f32), ReduceOp::sum);
    ADD_FAILURE() << "a broken communicator accepted a call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unusable after an earlier failure"), std::string::npos) << e.what();
  }
}

TEST(MpiErrors, BecomeExceptionsNamingTheCall) {
  try {
    MpiComm::split(MPI_COMM_WORLD, -5, 0, "a split with a negative color");
    ADD_FAILURE() << "no MpiError";
  } catch (const MpiError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("MPI_Comm_split (a split with a negative color): "), std::string::npos) << message;
    EXPECT_NE(message.find("(MPI error class "), std::string::npos) << message;
    EXPECT_NE(e.code(), MPI_SUCCESS);
  }
  EXPECT_THROW(MpiCommunicator(MPI_COMM_WORLD, "world", test_options(4)), std::invalid_argument);  // pieces < 8 bytes
}

}  // namespace
}  // namespace linea
