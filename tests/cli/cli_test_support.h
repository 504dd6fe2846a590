#pragma once
// Runs the real kvscope-cli binary (KVSCOPE_CLI) and parses its output.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvscope::cli_test {

namespace fs = std::filesystem;

inline fs::path fixturesDir() { return fs::path(KVSCOPE_FIXTURES); }
inline std::string modelDir(const std::string& name) { return (fixturesDir() / "models" / name).string(); }

inline nlohmann::json readJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A scratch directory, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("kvscope_cli_test_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline std::string shellQuote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CliResult {
  bool exited = false;  // false: killed by a signal (a crash)
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
  std::string command;

  // The last non-empty line of stdout, parsed as JSON (null when it is not JSON).
  nlohmann::json lastJson() const { return nlohmann::json::parse(lastLine(), nullptr, false); }
  std::string lastLine() const {
    const auto lines = stdoutLines();
    return lines.empty() ? std::string() : lines.back();
  }
  std::vector<std::string> stdoutLines() const {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) lines.push_back(line);
    }
    return lines;
  }
  std::string describe() const {
    return "command: " + command + "\nexit: " + (exited ? std::to_string(exit_code) : "signal " + std::to_string(signal)) +
           "\nstderr: " + err + "\nstdout (tail): " + out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
  }
};

// Runs kvscope-cli with the arguments; stdout through popen, stderr via a file.
inline CliResult runCli(const std::vector<std::string>& args) {
  static int counter = 0;
  const fs::path err_file =
      fs::temp_directory_path() / ("kvscope_cli_stderr_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::string command = shellQuote(KVSCOPE_CLI);
  for (const auto& a : args) command += " " + shellQuote(a);
  CliResult result;
  result.command = command;
  command += " 2>" + shellQuote(err_file.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "popen failed for " << command;
    return result;
  }
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  std::ifstream err(err_file, std::ios::binary);
  result.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  fs::remove(err_file);
  return result;
}

// Runs and expects success with a JSON object on the last stdout line.
inline nlohmann::json runJson(const std::vector<std::string>& args, CliResult* full = nullptr) {
  CliResult r = runCli(args);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  const auto j = r.lastJson();
  EXPECT_TRUE(j.is_object()) << "last stdout line is not a JSON object\n" << r.describe();
  if (full) *full = r;
  return j.is_object() ? j : nlohmann::json::object();
}

inline std::string joinIds(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

// The kvscope document in a .kvtrace's safetensors header.
inline nlohmann::json traceDocument(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) return nullptr;
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (8 + header > bytes.size()) return nullptr;
  const auto json = nlohmann::json::parse(bytes.substr(8, header), nullptr, false);
  return nlohmann::json::parse(json["__metadata__"]["kvscope"].get<std::string>(), nullptr, false);
}

// The manifest of a capture: the JSON string in the safetensors header's metadata.
inline nlohmann::json manifestOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  return nlohmann::json::parse(nlohmann::json::parse(header)["__metadata__"]["kvscope_capture"].get<std::string>());
}

// kvscope's own (round, phase) of check's root cause, from the keys the writer
// adds to each call (readers of the format ignore them).
inline std::pair<int64_t, std::string> sessionMoment(const nlohmann::json& manifest, const nlohmann::json& cause) {
  for (const auto& call : manifest["calls"]) {
    if (call["role"] != cause["role"] || call["index"] != cause["call"]) continue;
    const auto& own = call["kvscope"];
    if (cause["step"] == "between") return {own.value("between_round", -1), own.value("between_phase", "")};
    return {own["round"].get<int64_t>(), own["phase"].get<std::string>()};
  }
  return {-1, ""};
}

}  // namespace kvscope::cli_test
