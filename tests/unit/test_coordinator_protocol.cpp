// The coordinator's wire protocol under hostile input, on loopback: malformed JSON, oversized and
// truncated messages, binary garbage, missing/wrong tokens and wrong field types are each answered
// with an error naming the problem and the connection is closed; the server keeps serving (a good
// request afterwards works); idle connections starve neither requests nor heartbeats. Also: the
// token file's permission check and the state-dir lock.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "coordinator/protocol.h"
#include "tests/testing/coordinator_harness.h"

namespace linea::testing {
namespace {

using namespace std::chrono_literals;
using coordinator::kMaxMessageBytes;

class ProtocolTest : public ::testing::Test {
 protected:
  ProtocolTest() : server_(test_options(dir_)), token_(coordinator::read_token_file(dir_ / "token")) {}

  // Sends bytes on a fresh connection; returns the reply, and checks that the server then closes.
  nlohmann::json reply_and_close(const std::string& bytes, bool finish_sending = false) {
    RawConnection c(server_.endpoint().port);
    c.send(bytes);
    if (finish_sending) c.finish_sending();
    const std::string line = c.read_line();
    EXPECT_FALSE(line.empty()) << "no reply to " << bytes.substr(0, 80);
    const nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(reply.is_object()) << line;
    EXPECT_TRUE(c.closed_by_server()) << "the connection stayed open after an error reply";
    return reply;
  }

  std::string request_line(nlohmann::json message) {
    message["token"] = token_;
    return message.dump() + "\n";
  }

  void expect_error(const nlohmann::json& reply, const std::string& code, const std::string& mentions) {
    EXPECT_EQ(reply.value("ok", true), false) << reply;
    EXPECT_EQ(reply.value("code", ""), code) << reply;
    EXPECT_NE(reply.value("error", "").find(mentions), std::string::npos) << reply;
  }

  void expect_still_serving() {
    const nlohmann::json status = server_.request({{"type", "status"}});
    EXPECT_TRUE(status["ok"].get<bool>());
  }

  TempDir dir_;
  CoordinatorThread server_;
  std::string token_;
};

TEST_F(ProtocolTest, MalformedJsonIsRejected) {
  expect_error(reply_and_close("{\"type\": \"status\", \"token\": \n"), "malformed", "JSON");
  expect_error(reply_and_close("[1, 2, 3]\n"), "malformed", "expected a JSON object");
  expect_error(reply_and_close("\n"), "malformed", "JSON");
  expect_still_serving();
}

TEST_F(ProtocolTest, OversizedMessageIsRejected) {
  std::string huge = "{\"token\": \"" + token_ + "\", \"type\": \"status\", \"pad\": \"";
  huge += std::string(kMaxMessageBytes, 'x');
  huge += "\"}\n";
  expect_error(reply_and_close(huge), "too_large", std::to_string(kMaxMessageBytes));
  expect_still_serving();
}

TEST_F(ProtocolTest, TruncatedMessageIsRejected) {
  const std::string line = request_line({{"type", "status"}});
  expect_error(reply_and_close(line.substr(0, line.size() / 2), /*finish_sending=*/true), "truncated", "newline");
  expect_still_serving();
}

TEST_F(ProtocolTest, BinaryGarbageIsRejected) {
  std::string garbage;
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; ++i) {
    char c = static_cast<char>(rng() & 0xff);
    garbage += c == '\n' ? '\0' : c;
  }
  expect_error(reply_and_close(garbage + "\n"), "malformed", "JSON");
  expect_error(reply_and_close(std::string("{\"token\": \"\xff\xfe\", \"type\": \"status\"}\n")), "malformed", "JSON");
  expect_still_serving();
}

TEST_F(ProtocolTest, UnauthenticatedRequestsAreRefused) {
  expect_error(reply_and_close("{\"type\": \"status\"}\n"), "unauthorized", "token");
  expect_error(reply_and_close("{\"type\": \"status\", \"token\": \"wrong-token-0123456789\"}\n"), "unauthorized",
               "token");
  expect_error(reply_and_close("{\"type\": \"status\", \"token\": 12345}\n"), "unauthorized", "token");
  expect_error(
      reply_and_close("{\"type\": \"shutdown\", \"token\": \"" + token_.substr(0, token_.size() - 1) + "\"}\n"),
      "unauthorized", "token");
  expect_still_serving();  // the unauthenticated shutdown did nothing
}

TEST_F(ProtocolTest, WrongTypesAreRejectedNamingTheField) {
  expect_error(reply_and_close(request_line({{"type", 5}})), "malformed", "request.type");
  expect_error(reply_and_close(request_line({{"type", "launch-missiles"}})), "malformed", "request.type");
  expect_error(reply_and_close(request_line({{"type", "submit"}, {"runs", "all of them"}})), "malformed",
               "submit.runs");
  nlohmann::json run = fake_run(dir_, "r1", {});
  run["config"] = "relative/path.toml";
  expect_error(reply_and_close(request_line({{"type", "submit"}, {"runs", {run}}})), "malformed",
               "submit.runs[0].config");
  run = fake_run(dir_, "r1", {});
  run["processes"] = "two";
  expect_error(reply_and_close(request_line({{"type", "submit"}, {"runs", {run}}})), "malformed",
               "submit.runs[0].processes");
  run["processes"] = 1;
  run["name"] = "../escape";
  expect_error(reply_and_close(request_line({{"type", "submit"}, {"runs", {run}}})), "malformed",
               "submit.runs[0].name");
  expect_error(reply_and_close(request_line({{"type", "heartbeat"}, {"run", "r1"}, {"attempt", 0}, {"step", "ten"}})),
               "malformed", "heartbeat.step");
  expect_error(reply_and_close(request_line({{"type", "heartbeat"}, {"run", "nobody"}, {"attempt", 0}, {"step", 1}})),
               "rejected", "nobody");
  expect_error(reply_and_close(request_line({{"type", "cancel"}, {"runs", {"nobody"}}})), "rejected", "nobody");
  expect_still_serving();
  EXPECT_TRUE(server_.request({{"type", "status"}})["runs"].empty()) << "a rejected submit left a run behind";
}

TEST_F(ProtocolTest, ConnectionCarriesSeveralRequests) {
  RawConnection c(server_.endpoint().port);
  c.send(request_line({{"type", "status"}}) + request_line({{"type", "status"}}));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(nlohmann::json::parse(c.read_line())["ok"].get<bool>());
  c.send(request_line({{"type", "status"}}));
  EXPECT_TRUE(nlohmann::json::parse(c.read_line())["ok"].get<bool>());
}

TEST_F(ProtocolTest, RandomMutationsNeverStopTheServer) {
  // A heartbeat: mutations reach every field check without touching the file system.
  const std::string good = request_line({{"type", "heartbeat"},
                                         {"run", "some/run"},
                                         {"attempt", 0},
                                         {"step", 12},
                                         {"loss", 3.25},
                                         {"tokens_per_s", 1e5},
                                         {"val_loss", 3.5},
                                         {"checkpoint_step", 10}});
  std::mt19937 rng(1234);
  int errors = 0;
  for (int i = 0; i < 150; ++i) {
    std::string bytes = good.substr(0, good.size() - 1);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng() % 256); break;
        case 1: bytes.erase(at, 1 + rng() % 8); break;
        default: bytes.insert(at, 1, "{}[]\",:0\\"[rng() % 9]); break;
      }
    }
    for (char& ch : bytes)
      if (ch == '\n') ch = ' ';
    RawConnection c(server_.endpoint().port);
    c.send(bytes + "\n");
    const nlohmann::json reply = nlohmann::json::parse(c.read_line(), nullptr, false);
    ASSERT_TRUE(reply.is_object()) << "no JSON reply to mutation " << i;
    errors += !reply.value("ok", false);
  }
  EXPECT_GT(errors, 100);
  expect_still_serving();
}

TEST_F(ProtocolTest, HeartbeatClientCountsDeliveriesAndRefusals) {
  server_.request({{"type", "submit"}, {"runs", {fake_run(dir_, "known", {"fake.steps=1"})}}});
  {
    coordinator::HeartbeatClient ghost(server_.endpoint(), token_, "ghost", 0, 1);  // no such run
    ghost.heartbeat({1, 2.0, 3.0, std::nullopt, -1});
    ASSERT_TRUE(wait_until([&] { return ghost.failed() == 2; }, 5s));  // the registration and the heartbeat
    EXPECT_EQ(ghost.sent(), 0);
  }
  coordinator::HeartbeatClient stale(server_.endpoint(), token_, "known", 99, 1);  // not the current attempt
  stale.heartbeat({1, 2.0, 3.0, 2.5, 0});
  ASSERT_TRUE(wait_until([&] { return stale.sent() == 2; }, 5s));  // accepted, and ignored
  EXPECT_EQ(stale.failed(), 0);
  EXPECT_NE(server_.run_status("known")["attempt"], 99);
}

// 100 idle, unauthenticated connections (more than max_connections), renewed as the server drops
// them for 3 s while a job trains: `status` still answers at once, the job's heartbeats still
// arrive (no teardown for 2 s of silence: starved heartbeats would be silent for the whole 3 s; a
// 1 s timeout tore the job down on a loaded machine under ASan), and an idle connection is closed
// after the first-message deadline.
TEST(CoordinatorIdleConnections, StarveNeitherStatusNorHeartbeats) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.heartbeat_timeout_s = 2.0;
  CoordinatorThread server(options);
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "busy", {"fake.steps=120", "fake.step_ms=50"})}}});
  ASSERT_TRUE(wait_until([&] { return server.run_status("busy").value("step", -1) >= 1; }, 10s));

  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<RawConnection>(server.endpoint().port));
  int answered = 0;
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 20; ++i)
      idle[(round * 20 + i) % idle.size()] = std::make_unique<RawConnection>(server.endpoint().port);
    const auto start = std::chrono::steady_clock::now();
    try {
      answered += server.request({{"type", "status"}})["ok"].get<bool>();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "status with 100 idle connections open: " << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(answered, 30);
  const nlohmann::json status = wait_for_end(server, "busy", 20s);
  ASSERT_EQ(status["state"], "completed") << status.dump();
  EXPECT_EQ(status["accounting"]["restarts"], 0) << status.dump();  // never silent for 2 s

  RawConnection silent(server.endpoint().port);
  const auto opened = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_by_server());
  EXPECT_LT(std::chrono::steady_clock::now() - opened, 4s);  // the first-message deadline, 2 s
}

TEST(CoordinatorSetup, RefusesATokenFileOthersCanRead) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  ::chmod(options.token_file.c_str(), 0644);
  try {
    coordinator::Coordinator server(options);
    FAIL() << "a world-readable token file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600 " + options.token_file), std::string::npos) << e.what();
  }
  write_text(dir / "short-token", "abc\n");
  ::chmod((dir / "short-token").c_str(), 0600);
  EXPECT_THROW(coordinator::read_token_file(dir / "short-token"), std::runtime_error);
  EXPECT_THROW(coordinator::read_token_file(dir / "missing"), std::runtime_error);
}

TEST(CoordinatorSetup, RefusesASecondCoordinatorOnTheSameStateDirectory) {
  TempDir dir;
  CoordinatorThread first(test_options(dir));
  try {
    coordinator::Coordinator second(test_options(dir));
    FAIL() << "two coordinators share one journal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another coordinator"), std::string::npos) << e.what();
  }
}

TEST(CoordinatorSetup, RejectsBadOptionsNamingThem) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.slots = 0;
  EXPECT_THROW(
      {
        try {
          options.validate();
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("--slots"), std::string::npos);
          throw;
        }
      },
      std::invalid_argument);
  options = test_options(dir);
  options.launch = coordinator::LaunchTemplate::uniform("worker {confg}");
  EXPECT_THROW(options.validate(), std::invalid_argument);
}

TEST(HeartbeatClient, NeverBlocksOrThrowsWithoutACoordinator) {
  TempDir dir;
  coordinator::create_token_file(dir / "token");
  const auto start = std::chrono::steady_clock::now();
  {
    // Nothing listens on this port (a closed server's), so every send fails.
    uint16_t port = 0;
    {
      boost::asio::io_context io;
      boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
      port = a.local_endpoint().port();
    }
    coordinator::HeartbeatClient client({"127.0.0.1", port}, coordinator::read_token_file(dir / "token"), "r", 0, 1,
                                        std::chrono::milliseconds(200));
    for (int step = 0; step < 1000; ++step) client.heartbeat({step, 1.0, 10.0, std::nullopt, -1});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200)) << "heartbeat() blocked";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << "the destructor hung";
  ::unsetenv("LINEA_COORDINATOR");
  EXPECT_EQ(coordinator::HeartbeatClient::from_env(), nullptr);
  ::setenv("LINEA_COORDINATOR", "not-an-endpoint", 1);
  EXPECT_EQ(coordinator::HeartbeatClient::from_env(), nullptr);  // logged, not thrown
  ::unsetenv("LINEA_COORDINATOR");
}

}  // namespace
}  // namespace linea::testing
