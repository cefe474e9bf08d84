#include "coordinator/json_fields.h"

#include <cmath>
#include <stdexcept>

namespace linea::coordinator {
namespace {

constexpr size_t kMaxShownBytes = 60;

std::string type_word(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::binary: return "binary data";
    case nlohmann::json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

}  // namespace

std::string describe_json_value(const nlohmann::json& value) {
  if (value.is_object() || value.is_array()) return type_word(value);
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxShownBytes) text = text.substr(0, kMaxShownBytes) + "...";
  return value.is_null() ? text : type_word(value) + " " + text;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string path) : object_(object), path_(std::move(path)) {
  if (!object_.is_object())
    throw std::invalid_argument(path_ + ": expected a JSON object, got " + describe_json_value(object_));
}

std::string JsonFields::field_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool JsonFields::has(std::string_view key) const { return find(key) != nullptr; }

const nlohmann::json* JsonFields::find(std::string_view key) const {
  auto it = object_.find(std::string(key));
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

void JsonFields::fail(std::string_view key, std::string_view expected) const {
  const nlohmann::json* v = find(key);
  throw std::invalid_argument(field_path(key) + ": expected " + std::string(expected) + ", got " +
                              (v ? describe_json_value(*v) : std::string("nothing (the field is missing)")));
}

std::string JsonFields::required_string(std::string_view key, size_t max_bytes) const {
  const nlohmann::json* v = find(key);
  const std::string expected = "a non-empty string of at most " + std::to_string(max_bytes) + " bytes";
  if (!v || !v->is_string()) fail(key, expected);
  const auto& s = v->get_ref<const std::string&>();
  if (s.empty() || s.size() > max_bytes) fail(key, expected);
  return s;
}

std::string JsonFields::string(std::string_view key, std::string fallback, size_t max_bytes) const {
  const nlohmann::json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string() || v->get_ref<const std::string&>().size() > max_bytes)
    fail(key, "a string of at most " + std::to_string(max_bytes) + " bytes");
  return v->get<std::string>();
}

int64_t JsonFields::required_integer(std::string_view key, int64_t min, int64_t max) const {
  const nlohmann::json* v = find(key);
  const std::string expected = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v || !v->is_number_integer()) fail(key, expected);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(key, expected);
  const int64_t x = v->get<int64_t>();
  if (x < min || x > max) fail(key, expected);
  return x;
}

int64_t JsonFields::integer(std::string_view key, int64_t fallback, int64_t min, int64_t max) const {
  return has(key) ? required_integer(key, min, max) : fallback;
}

double JsonFields::required_number(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v || !v->is_number() || !std::isfinite(v->get<double>())) fail(key, "a finite number");
  return v->get<double>();
}

std::optional<double> JsonFields::optional_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return required_number(key);
}

bool JsonFields::boolean(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, "true or false");
  return v->get<bool>();
}

std::vector<std::string> JsonFields::string_list(std::string_view key, size_t max_items, size_t max_bytes) const {
  const nlohmann::json& items = array(key, max_items);
  std::vector<std::string> out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string() || items[i].get_ref<const std::string&>().size() > max_bytes)
      throw std::invalid_argument(field_path(key) + "[" + std::to_string(i) + "]: expected a string of at most " +
                                  std::to_string(max_bytes) + " bytes, got " + describe_json_value(items[i]));
    out.push_back(items[i].get<std::string>());
  }
  return out;
}

const nlohmann::json& JsonFields::array(std::string_view key, size_t max_items) const {
  static const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json* v = find(key);
  if (!v) return empty;
  if (!v->is_array() || v->size() > max_items) fail(key, "an array of at most " + std::to_string(max_items) + " items");
  return *v;
}

JsonFields JsonFields::object(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v || !v->is_object()) fail(key, "an object");
  return JsonFields(*v, field_path(key));
}

}  // namespace linea::coordinator
