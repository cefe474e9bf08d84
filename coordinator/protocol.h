// The coordinator's wire protocol: newline-delimited JSON over TCP. Each request is one JSON object
// on one line of at most kMaxMessageBytes, carrying "token" (the shared secret) and "type":
//   submit    {runs: [RunSpec...], sweep?: SweepSpec}     → {ok, accepted: [names]}
//   status    {}                                          → {ok, runs: [run status...]}
//   cancel    {runs: [names]}                             → {ok, cancelled: [names]}
//   register  WorkerRegistration (a worker's rank 0)      → {ok}
//   heartbeat WorkerHeartbeat                             → {ok} ({ok, stale: true} for an old attempt)
//   shutdown  {}                                          → {ok}; running jobs are stopped, state kept
// Every reply is one line: {"ok": true, ...} or {"ok": false, "code": ..., "error": "..."}. A request
// that is malformed, oversized, truncated or unauthenticated gets an error reply and the connection
// is closed; a connection may otherwise carry several requests in turn.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace linea::coordinator {

constexpr size_t kMaxMessageBytes = 1 << 20;  // one request line, newline included
constexpr uint16_t kDefaultPort = 47431;

// Error codes of a failed reply.
namespace error_code {
inline constexpr const char* kMalformed = "malformed";        // not a JSON object / wrong field types
inline constexpr const char* kTooLarge = "too_large";         // no newline within kMaxMessageBytes
inline constexpr const char* kTruncated = "truncated";        // the connection ended inside a message
inline constexpr const char* kUnauthorized = "unauthorized";  // missing or wrong token
inline constexpr const char* kRejected = "rejected";          // well-formed but refused (unknown run...)
}  // namespace error_code

// A failure to be reported to the peer with an error code.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

struct Endpoint {
  std::string host = "127.0.0.1";
  uint16_t port = kDefaultPort;
  // "host:port"; `what` names the source in errors (e.g. "LINEA_COORDINATOR").
  static Endpoint parse(std::string_view text, std::string_view what);
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

enum class RequestType { submit, status, cancel, register_worker, heartbeat, shutdown };
std::string_view request_type_name(RequestType type);

struct Request {
  RequestType type;
  nlohmann::json body;  // the whole message (token removed)
};

// Parses one line (without its newline) and checks the token. Throws ProtocolError (kMalformed or
// kUnauthorized).
Request parse_request(std::string_view line, std::string_view token);

// One line, newline included; invalid UTF-8 in strings is replaced, never thrown.
std::string encode_message(const nlohmann::json& message);
nlohmann::json ok_reply(nlohmann::json fields = nlohmann::json::object());
nlohmann::json error_reply(std::string_view code, std::string_view message);

struct WorkerRegistration {
  std::string run;
  int64_t attempt = 0;
  int64_t pid = 0;
  std::string host;
  int64_t world_size = 1;

  static WorkerRegistration from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// What a worker reports with each heartbeat.
struct Heartbeat {
  int64_t step = 0;
  double loss = 0;  // NaN travels as null
  double tokens_per_s = 0;
  std::optional<double> val_loss;
  int64_t checkpoint_step = -1;  // the last committed checkpoint (-1: none yet)
  std::string checkpoint_error{};  // why the newest checkpoint write failed ("": it did not)
};

struct WorkerHeartbeat {
  std::string run;
  int64_t attempt = 0;
  Heartbeat progress;

  static WorkerHeartbeat from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

}  // namespace linea::coordinator
