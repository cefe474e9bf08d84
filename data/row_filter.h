// RowFilter: which documents to keep, by conditions on numeric fields (`--where "int_score>=3"`,
// `data.where`). A filter is a list of conditions, all of which must hold; each is
//   NAME OP NUMBER      OP one of >=, >, <=, <, ==, !=
// and several are separated by commas ("int_score>=3,language_score>0.9"). A row whose value is
// null (a parquet null, or a JSON field that is missing, null or not a number) does not pass.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace linea::data {

struct RowCondition {
  enum class Op : uint8_t { ge, gt, le, lt, eq, ne };
  std::string field;
  Op op = Op::ge;
  double value = 0;
  bool holds(double x) const;
  std::string text() const;  // "int_score>=3"
};

class RowFilter {
 public:
  RowFilter() = default;
  // Parses each expression (comma-separated conditions); throws std::invalid_argument naming the
  // expression and what is wrong.
  static RowFilter parse(const std::vector<std::string>& expressions);
  bool empty() const { return conditions_.empty(); }
  const std::vector<RowCondition>& conditions() const { return conditions_; }
  std::string text() const;  // the conditions joined with ","; "" when empty

 private:
  std::vector<RowCondition> conditions_;
};

}  // namespace linea::data
