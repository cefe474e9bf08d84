#include "worker/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "data/atomic_file.h"

namespace linea {

MetricsLog::MetricsLog(std::filesystem::path path, int64_t resume_step) : path_(std::move(path)) {
  std::string kept;
  if (resume_step > 0 && std::filesystem::exists(path_)) {
    std::istringstream lines(data::read_file(path_));
    std::string line;
    for (int64_t number = 1; std::getline(lines, line); ++number) {
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.contains("step") || !j["step"].is_number_integer()) {
        // A torn last line (the process died while writing it) is dropped; anything else is damage.
        if (lines.peek() == EOF) break;
        throw std::runtime_error(path_.string() + ": line " + std::to_string(number) +
                                 " is not a JSON object with an integer \"step\"");
      }
      if (j["step"].get<int64_t>() <= resume_step) kept += line + "\n";
    }
  }
  data::write_file_atomically(path_, kept);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw std::runtime_error(path_.string() + ": cannot open for appending: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::append(const nlohmann::json& line) {
  const std::string text = line.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    throw std::runtime_error(path_.string() + ": write failed: " + std::strerror(errno));
  }
}

}  // namespace linea
