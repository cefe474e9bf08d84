// Boost.Asio, as the coordinator includes it: Boost 1.74's awaitable.hpp uses std::exchange without
// including <utility>, which GCC 12's C++20 headers no longer pull in, so <utility> comes first.
#pragma once
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on
