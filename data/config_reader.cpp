#include "data/config_reader.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace linea {

struct ConfigReader::Tables {
  toml::table root;      // the file with the overrides applied
  toml::table resolved;  // every key read, with the value used
};

namespace {

std::vector<std::string> split_dotted(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

const toml::node* find_node(const toml::table& root, std::string_view dotted) {
  const toml::table* table = &root;
  const std::vector<std::string> parts = split_dotted(dotted);
  for (size_t i = 0; i < parts.size(); ++i) {
    const toml::node* n = table->get(parts[i]);
    if (!n || i + 1 == parts.size()) return n;
    table = n->as_table();
    if (!table) return nullptr;
  }
  return nullptr;
}

// The table that holds the last part of `parts`, creating tables on the way. Returns nullptr and
// sets `conflict` when a non-table sits on the path.
toml::table* parent_table(toml::table& root, const std::vector<std::string>& parts, std::string& conflict) {
  toml::table* table = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = table->get(parts[i]);
    if (!n) n = &table->insert_or_assign(parts[i], toml::table{}).first->second;
    if (!n->is_table()) {
      conflict.clear();
      for (size_t j = 0; j <= i; ++j) conflict += (j ? "." : "") + parts[j];
      return nullptr;
    }
    table = n->as_table();
  }
  return table;
}

void record(toml::table& resolved, const std::string& dotted, const toml::node& value) {
  const std::vector<std::string> parts = split_dotted(dotted);
  std::string conflict;
  if (toml::table* parent = parent_table(resolved, parts, conflict)) parent->insert_or_assign(parts.back(), value);
}

std::string_view type_phrase(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

template <class T>
std::string range_phrase(const char* what, T min, T max, T no_min, T no_max) {
  std::ostringstream os;
  os << what;
  if (min != no_min && max != no_max) {
    os << " in [" << min << ", " << max << "]";
  } else if (min != no_min) {
    os << " >= " << min;
  } else if (max != no_max) {
    os << " <= " << max;
  }
  return os.str();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void collect_leaves(const toml::table& table, const std::string& prefix, std::vector<std::string>& out) {
  for (auto&& [key, node] : table) {
    const std::string path = join(prefix, key.str());
    if (const toml::table* sub = node.as_table()) {
      collect_leaves(*sub, path, out);
    } else {
      out.push_back(path);
    }
  }
}

bool is_under(const std::string& key, const std::string& section) {
  return key.size() > section.size() && key.compare(0, section.size(), section) == 0 && key[section.size()] == '.';
}

bool valid_key_part(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

// ---- ConfigReader ------------------------------------------------------------------------------

ConfigReader::ConfigReader(std::unique_ptr<Tables> tables, std::string source)
    : source_(std::move(source)), tables_(std::move(tables)) {}
ConfigReader::ConfigReader(ConfigReader&&) noexcept = default;
ConfigReader& ConfigReader::operator=(ConfigReader&&) noexcept = default;
ConfigReader::~ConfigReader() = default;

ConfigReader ConfigReader::from_string(std::string_view text, std::string source,
                                       const std::vector<std::string>& overrides) {
  auto tables = std::make_unique<Tables>();
  try {
    tables->root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ":" << e.source().begin.column
       << ": TOML parse error: " << e.description();
    throw std::invalid_argument(os.str());
  }
  ConfigReader reader(std::move(tables), std::move(source));
  for (const std::string& o : overrides) reader.apply_override(o);
  return reader;
}

ConfigReader ConfigReader::from_file(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot open config file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::invalid_argument("cannot read config file '" + path + "'");
  return from_string(text.str(), path, overrides);
}

void ConfigReader::apply_override(std::string_view assignment) {
  const std::string what = "override '" + std::string(assignment) + "'";
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    throw std::invalid_argument(what + ": expected section.key=value");
  }
  const std::string key(trim(assignment.substr(0, eq)));
  const std::string_view value = trim(assignment.substr(eq + 1));
  const std::vector<std::string> parts = split_dotted(key);
  if (!std::all_of(parts.begin(), parts.end(), valid_key_part)) {
    throw std::invalid_argument(what + ": '" + key + "' is not a dotted key of letters, digits, '_' and '-'");
  }
  if (value.empty()) throw std::invalid_argument(what + ": missing value after '='");

  // A TOML literal (number, boolean, quoted string, array) when it parses as one, else a bare string.
  toml::table literal;
  try {
    literal = toml::parse("value = " + std::string(value));
  } catch (const toml::parse_error&) {
    literal = toml::table{};
  }
  std::string conflict;
  toml::table* parent = parent_table(tables_->root, parts, conflict);
  if (!parent) throw std::invalid_argument(what + ": '" + conflict + "' is not a table");
  if (const toml::node* existing = parent->get(parts.back()); existing && existing->is_table()) {
    throw std::invalid_argument(what + ": '" + key + "' is a table; override one of its keys");
  }
  if (literal.size() == 1 && literal.get("value")) {
    parent->insert_or_assign(parts.back(), *literal.get("value"));
  } else {
    parent->insert_or_assign(parts.back(), std::string(value));
  }
  overridden_[key] = std::string(assignment);
}

ConfigSection ConfigReader::section(std::string_view path) { return ConfigSection(this, std::string(path)); }

void ConfigReader::check_unknown_keys(const std::vector<std::string>& sections) const {
  std::vector<std::string> leaves;
  collect_leaves(tables_->root, "", leaves);
  std::vector<std::string> unknown;
  for (const std::string& key : leaves) {
    const bool checked = sections.empty() || std::any_of(sections.begin(), sections.end(),
                                                         [&](const std::string& s) { return is_under(key, s); });
    if (checked && !read_.count(key)) unknown.push_back(key);
  }
  if (unknown.empty()) return;
  std::string message = source_ + ": unknown key" + (unknown.size() > 1 ? "s" : "");
  for (size_t i = 0; i < unknown.size(); ++i) {
    const std::string& key = unknown[i];
    message += (i ? ", " : " ") + quoted(key);
    const std::string parent = key.substr(0, key.rfind('.') == std::string::npos ? 0 : key.rfind('.'));
    const std::string* best = nullptr;
    size_t best_distance = 3;  // suggest only close spellings
    for (const std::string& known : read_) {
      const std::string known_parent = known.substr(0, known.rfind('.') == std::string::npos ? 0 : known.rfind('.'));
      if (known_parent != parent) continue;
      const size_t d = edit_distance(key, known);
      if (d < best_distance) best_distance = d, best = &known;
    }
    if (best) message += " (did you mean " + quoted(*best) + "?)";
    if (overridden_.count(key)) message += " (set on the command line)";
  }
  throw std::invalid_argument(message);
}

std::string ConfigReader::resolved() const {
  std::ostringstream os;
  os << toml::toml_formatter(tables_->resolved);
  return os.str();
}

void ConfigReader::fail(const std::string& dotted, const std::string& message) const {
  std::string text = source_ + ": " + dotted + ": " + message;
  if (auto it = overridden_.find(dotted); it != overridden_.end()) {
    text += " (set on the command line by " + quoted(it->second) + ")";
  }
  throw std::invalid_argument(text);
}

// ---- ConfigSection -----------------------------------------------------------------------------

std::string ConfigSection::key_path(std::string_view key) const { return join(path_, key); }

ConfigSection ConfigSection::section(std::string_view name) const { return ConfigSection(reader_, key_path(name)); }

std::string ConfigSection::touch(std::string_view key) const {
  std::string full = key_path(key);
  reader_->read_.insert(full);
  return full;
}

bool ConfigSection::has(std::string_view key) const {
  return find_node(reader_->tables_->root, key_path(key)) != nullptr;
}

bool ConfigSection::is_array(std::string_view key) const {
  const toml::node* n = find_node(reader_->tables_->root, key_path(key));
  return n && n->is_array();
}

void ConfigSection::fail(std::string_view key, const std::string& message) const {
  reader_->fail(key_path(key), message);
}

int64_t ConfigSection::integer(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
  const std::string full = touch(key);
  const std::string expected = range_phrase("an integer", min, max, kNoMin, kNoMax);
  int64_t value = fallback;
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    if (!n->is_integer()) reader_->fail(full, "expected " + expected + ", got " + std::string(type_phrase(n->type())));
    value = n->as_integer()->get();
    if (value < min || value > max) reader_->fail(full, "expected " + expected + ", got " + std::to_string(value));
  }
  record(reader_->tables_->resolved, full, toml::value<int64_t>(value));
  return value;
}

int64_t ConfigSection::required_integer(std::string_view key, int64_t min, int64_t max) {
  if (!has(key))
    reader_->fail(touch(key), "missing (expected " + range_phrase("an integer", min, max, kNoMin, kNoMax) + ")");
  return integer(key, 0, min, max);
}

double ConfigSection::number(std::string_view key, double fallback, double min, double max) {
  const std::string full = touch(key);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::string expected = range_phrase("a number", min, max, -inf, inf);
  double value = fallback;
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    if (n->is_integer()) {
      value = static_cast<double>(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      value = n->as_floating_point()->get();
    } else {
      reader_->fail(full, "expected " + expected + ", got " + std::string(type_phrase(n->type())));
    }
    if (!(value >= min && value <= max)) {
      std::ostringstream got;
      got << value;
      reader_->fail(full, "expected " + expected + ", got " + got.str());
    }
  }
  record(reader_->tables_->resolved, full, toml::value<double>(value));
  return value;
}

bool ConfigSection::boolean(std::string_view key, bool fallback) {
  const std::string full = touch(key);
  bool value = fallback;
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    if (!n->is_boolean()) {
      reader_->fail(full, "expected a boolean (true or false), got " + std::string(type_phrase(n->type())));
    }
    value = n->as_boolean()->get();
  }
  record(reader_->tables_->resolved, full, toml::value<bool>(value));
  return value;
}

std::string ConfigSection::string(std::string_view key, std::string fallback) {
  const std::string full = touch(key);
  std::string value = std::move(fallback);
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    if (!n->is_string()) reader_->fail(full, "expected a string, got " + std::string(type_phrase(n->type())));
    value = n->as_string()->get();
  }
  record(reader_->tables_->resolved, full, toml::value<std::string>(value));
  return value;
}

std::string ConfigSection::name(std::string_view key, std::string fallback) {
  const toml::node* n = find_node(reader_->tables_->root, key_path(key));
  if (n && n->is_integer()) {
    const std::string digits = std::to_string(n->as_integer()->get());
    touch(key);
    record(reader_->tables_->resolved, key_path(key), toml::value<std::string>(digits));
    return digits;
  }
  return string(key, std::move(fallback));
}

std::string ConfigSection::required_string(std::string_view key) {
  if (!has(key)) reader_->fail(touch(key), "missing (expected a string)");
  return string(key, "");
}

std::string ConfigSection::choice(std::string_view key, std::string fallback, const std::vector<std::string>& allowed) {
  std::string value = string(key, std::move(fallback));
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    reader_->fail(key_path(key), "expected one of " + list + "; got " + quoted(value));
  }
  return value;
}

std::string ConfigSection::required_choice(std::string_view key, const std::vector<std::string>& allowed) {
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
  if (!has(key)) reader_->fail(touch(key), "missing (expected one of " + list + ")");
  return choice(key, "", allowed);
}

std::vector<int64_t> ConfigSection::integer_list(std::string_view key, std::vector<int64_t> fallback, int64_t min,
                                                 int64_t max) {
  const std::string full = touch(key);
  const std::string expected = "an array of " + range_phrase("integers", min, max, kNoMin, kNoMax);
  std::vector<int64_t> values = std::move(fallback);
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    const toml::array* array = n->as_array();
    if (!array) reader_->fail(full, "expected " + expected + ", got " + std::string(type_phrase(n->type())));
    values.clear();
    for (const toml::node& element : *array) {
      if (!element.is_integer()) {
        reader_->fail(full,
                      "expected " + expected + ", got an element that is " + std::string(type_phrase(element.type())));
      }
      const int64_t v = element.as_integer()->get();
      if (v < min || v > max) reader_->fail(full, "expected " + expected + ", got " + std::to_string(v));
      values.push_back(v);
    }
  }
  toml::array resolved;
  for (int64_t v : values) resolved.push_back(v);
  record(reader_->tables_->resolved, full, resolved);
  return values;
}

std::vector<std::string> ConfigSection::string_list(std::string_view key, std::vector<std::string> fallback) {
  const std::string full = touch(key);
  std::vector<std::string> values = std::move(fallback);
  if (const toml::node* n = find_node(reader_->tables_->root, full)) {
    const toml::array* array = n->as_array();
    if (!array) reader_->fail(full, "expected an array of strings, got " + std::string(type_phrase(n->type())));
    values.clear();
    for (const toml::node& element : *array) {
      if (!element.is_string()) {
        reader_->fail(
            full, "expected an array of strings, got an element that is " + std::string(type_phrase(element.type())));
      }
      values.push_back(element.as_string()->get());
    }
  }
  toml::array resolved;
  for (const std::string& v : values) resolved.push_back(v);
  record(reader_->tables_->resolved, full, resolved);
  return values;
}

}  // namespace linea
