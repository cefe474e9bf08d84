// MetricsLog: a run's metrics.jsonl, one JSON object per logged step, each line flushed as written.
// Opening it for a run resumed at step s first drops the lines of steps after s (they were logged
// after the checkpoint the run resumes from and will be logged again), rewriting the file
// atomically, so an interrupted and resumed run reads as one uninterrupted run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace linea {

class MetricsLog {
 public:
  // resume_step = 0 starts a new file (an old one is replaced).
  MetricsLog(std::filesystem::path path, int64_t resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void append(const nlohmann::json& line);  // must hold an integer "step"
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace linea
