#include "coordinator/protocol.h"

#include <charconv>
#include <limits>

#include "coordinator/json_fields.h"
#include "coordinator/run_spec.h"
#include "coordinator/token_file.h"

namespace linea::coordinator {
namespace {

constexpr RequestType kAllTypes[] = {RequestType::submit,          RequestType::status,    RequestType::cancel,
                                     RequestType::register_worker, RequestType::heartbeat, RequestType::shutdown};
constexpr int64_t kMaxStep = int64_t{1} << 53;
constexpr int64_t kMaxAttempt = 1 << 20;

}  // namespace

Endpoint Endpoint::parse(std::string_view text, std::string_view what) {
  const size_t colon = text.rfind(':');
  const std::string expected = std::string(what) +
                               ": expected host:port (e.g. 127.0.0.1:" + std::to_string(kDefaultPort) + "), got \"" +
                               std::string(text.substr(0, 100)) + "\"";
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) throw std::invalid_argument(expected);
  unsigned port = 0;
  const std::string_view digits = text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port > 65535) throw std::invalid_argument(expected);
  Endpoint e;
  e.host = std::string(text.substr(0, colon));
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') e.host = e.host.substr(1, e.host.size() - 2);
  e.port = static_cast<uint16_t>(port);
  return e;
}

std::string_view request_type_name(RequestType type) {
  switch (type) {
    case RequestType::submit: return "submit";
    case RequestType::status: return "status";
    case RequestType::cancel: return "cancel";
    case RequestType::register_worker: return "register";
    case RequestType::heartbeat: return "heartbeat";
    case RequestType::shutdown: return "shutdown";
  }
  return "?";
}

Request parse_request(std::string_view line, std::string_view token) {
  nlohmann::json message = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) throw ProtocolError(error_code::kMalformed, "request: expected one JSON object per line");
  if (!message.is_object())
    throw ProtocolError(error_code::kMalformed, "request: expected a JSON object, got " + describe_json_value(message));
  auto it = message.find("token");
  if (it == message.end() || !it->is_string() || !tokens_equal(it->get_ref<const std::string&>(), token))
    throw ProtocolError(error_code::kUnauthorized, "request: missing or wrong token");
  message.erase(it);
  auto type = message.find("type");
  if (type != message.end() && type->is_string()) {
    for (RequestType t : kAllTypes)
      if (*type == request_type_name(t)) return Request{t, std::move(message)};
  }
  throw ProtocolError(error_code::kMalformed,
                      "request.type: expected one of submit, status, cancel, register, heartbeat, shutdown, got " +
                          (type == message.end() ? std::string("nothing") : describe_json_value(*type)));
}

std::string encode_message(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

nlohmann::json ok_reply(nlohmann::json fields) {
  fields["ok"] = true;
  return fields;
}

nlohmann::json error_reply(std::string_view code, std::string_view message) {
  return {{"ok", false}, {"code", code}, {"error", message}};
}

WorkerRegistration WorkerRegistration::from_json(const nlohmann::json& j) {
  const JsonFields f(j, "register");
  WorkerRegistration r;
  r.run = f.required_string("run", 200);
  r.attempt = f.required_integer("attempt", 0, kMaxAttempt);
  r.pid = f.integer("pid", 0, 0, int64_t{1} << 31);
  r.host = f.string("host", "", 255);
  r.world_size = f.integer("world_size", 1, 1, kMaxProcessesPerRun);
  return r;
}

nlohmann::json WorkerRegistration::to_json() const {
  return {{"type", "register"}, {"run", run},   {"attempt", attempt},
          {"pid", pid},         {"host", host}, {"world_size", world_size}};
}

WorkerHeartbeat WorkerHeartbeat::from_json(const nlohmann::json& j) {
  const JsonFields f(j, "heartbeat");
  WorkerHeartbeat h;
  h.run = f.required_string("run", 200);
  h.attempt = f.required_integer("attempt", 0, kMaxAttempt);
  Heartbeat& p = h.progress;
  p.step = f.required_integer("step", 0, kMaxStep);
  p.loss = f.optional_number("loss").value_or(std::numeric_limits<double>::quiet_NaN());  // null: NaN
  p.tokens_per_s = f.optional_number("tokens_per_s").value_or(0);
  p.val_loss = f.optional_number("val_loss");
  p.checkpoint_step = f.integer("checkpoint_step", -1, -1, kMaxStep);
  p.checkpoint_error = f.string("checkpoint_error", "");
  return h;
}

nlohmann::json WorkerHeartbeat::to_json() const {
  nlohmann::json j = {{"type", "heartbeat"},
                      {"run", run},
                      {"attempt", attempt},
                      {"step", progress.step},
                      {"loss", progress.loss},
                      {"tokens_per_s", progress.tokens_per_s},
                      {"checkpoint_step", progress.checkpoint_step}};
  if (progress.val_loss) j["val_loss"] = *progress.val_loss;
  if (!progress.checkpoint_error.empty()) j["checkpoint_error"] = progress.checkpoint_error;
  return j;
}

}  // namespace linea::coordinator
