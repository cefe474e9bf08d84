#include "data/row_filter.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace linea::data {

namespace {

constexpr struct {
  const char* text;
  RowCondition::Op op;
} kOps[] = {{">=", RowCondition::Op::ge}, {"<=", RowCondition::Op::le}, {"==", RowCondition::Op::eq},
            {"!=", RowCondition::Op::ne}, {">", RowCondition::Op::gt},  {"<", RowCondition::Op::lt}};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

RowCondition parse_condition(const std::string& text, const std::string& expression) {
  const auto bad = [&](const std::string& what) {
    return std::invalid_argument("--where \"" + expression + "\": condition \"" + text + "\": " + what +
                                 " (expected NAME OP NUMBER, OP one of >= > <= < == !=)");
  };
  const size_t at = text.find_first_of("<>=!");
  if (at == std::string::npos) throw bad("no comparison operator");
  RowCondition c;
  c.field = trim(text.substr(0, at));
  if (c.field.empty()) throw bad("no field name");
  size_t op_len = 0;
  for (const auto& op : kOps) {
    const std::string_view t = op.text;
    if (text.compare(at, t.size(), t) == 0) {
      c.op = op.op;
      op_len = t.size();
      break;
    }
  }
  if (op_len == 0) throw bad("unknown operator");
  const std::string number = trim(text.substr(at + op_len));
  size_t used = 0;
  try {
    c.value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !std::isfinite(c.value))
    throw bad("\"" + number + "\" is not a number");
  return c;
}

}  // namespace

bool RowCondition::holds(double x) const {
  switch (op) {
    case Op::ge: return x >= value;
    case Op::gt: return x > value;
    case Op::le: return x <= value;
    case Op::lt: return x < value;
    case Op::eq: return x == value;
    case Op::ne: return x != value;
  }
  return false;
}

std::string RowCondition::text() const {
  const char* op_text = "";
  for (const auto& o : kOps) {
    if (o.op == op) op_text = o.text;
  }
  char number[32];
  const auto end = std::to_chars(number, number + sizeof number, value).ptr;  // shortest exact form
  return field + op_text + std::string(number, end);
}

RowFilter RowFilter::parse(const std::vector<std::string>& expressions) {
  RowFilter f;
  for (const std::string& e : expressions) {
    size_t begin = 0;
    for (;;) {
      const size_t comma = e.find(',', begin);
      const std::string part = trim(e.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
      if (part.empty()) throw std::invalid_argument("--where \"" + e + "\": an empty condition");
      f.conditions_.push_back(parse_condition(part, e));
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
  }
  return f;
}

std::string RowFilter::text() const {
  std::string t;
  for (const auto& c : conditions_) t += (t.empty() ? "" : ",") + c.text();
  return t;
}

}  // namespace linea::data
