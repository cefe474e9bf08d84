// error_of: runs fn, expects it to throw E (std::exception by default) and returns the message, for
// tests that check what an error says. A different exception type or none at all is a test failure
// (the returned text is then the other exception's message, or empty).
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <type_traits>

namespace linea::testing {

template <class E = std::exception, class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    if constexpr (!std::is_same_v<E, std::exception>) {
      if (dynamic_cast<const E*>(&e) == nullptr) ADD_FAILURE() << "wrong exception type: " << e.what();
    }
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

}  // namespace linea::testing
