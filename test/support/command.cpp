#include "command.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "spawn.hpp"
#include "timeouts.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace redlock::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string make_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/redlock-cmd.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  return pattern;
}

}  // namespace

Command::Command(std::vector<std::string> argv, std::vector<std::string> env) : dir_(make_dir()) {
  // Everything the child needs is prepared before fork: the test may have
  // other threads, so only async-signal-safe calls run between fork and exec.
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  for (auto& e : env) environment.push_back(std::move(e));
  std::vector<char*> c_env;
  for (auto& e : environment) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  std::vector<char*> c_args;
  for (auto& a : argv) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  const int out = ::open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err = ::open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || null_in < 0) throw std::runtime_error("Command: cannot open its files");
  const pid_t child = spawn_child(c_args.data(), c_env.data(), {null_in, out, err}, true);
  const int fork_errno = errno;
  ::close(out);
  ::close(err);
  ::close(null_in);
  if (child < 0) throw std::runtime_error("fork: " + std::string(std::strerror(fork_errno)));
  pid_ = child;
}

Command::~Command() {
  if (!status_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  } else {
    // The child is gone; what it started may not be.
    ::kill(-pid_, SIGKILL);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void Command::signal(int signum) const {
  if (!status_) ::kill(pid_, signum);
}

bool Command::exited() {
  if (status_) return true;
  int raw = 0;
  if (::waitpid(pid_, &raw, WNOHANG) != pid_) return false;
  status_ = WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : WEXITSTATUS(raw);
  return true;
}

std::optional<int> Command::wait(std::chrono::milliseconds deadline) {
  auto until = std::chrono::steady_clock::now() + scaled(deadline);
  for (int i = 0; i < 1000000 && !exited() && std::chrono::steady_clock::now() < until; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  exited();
  return status_;
}

std::string Command::out() const {
  return read_file(dir_ + "/out");
}

std::string Command::err() const {
  return read_file(dir_ + "/err");
}

Finished run_command(std::vector<std::string> argv, std::vector<std::string> env,
                     std::chrono::milliseconds deadline) {
  Command command(std::move(argv), std::move(env));
  std::optional<int> status = command.wait(deadline);
  if (!status) throw std::runtime_error("command still running after its deadline; stderr: " + command.err());
  return {*status, command.out(), command.err()};
}

}  // namespace redlock::test
