// The redlock command, driven as a user would: the built binary (REDLOCK_CLI,
// set by test/meson.build) against real redis-servers.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/command.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"
#include "support/json.hpp"
#include "support/timeouts.hpp"

using namespace std::chrono_literals;
using redlock::test::Cluster;
using redlock::test::Command;
using redlock::test::eventually;
using redlock::test::Json;
using redlock::test::run_command;

namespace {

std::string cli() {
  const char* path = std::getenv("REDLOCK_CLI");
  if (path == nullptr) throw std::runtime_error("REDLOCK_CLI is not set (run through meson test)");
  return path;
}

std::string uri(Cluster& masters, std::size_t i) {
  return "redis://127.0.0.1:" + std::to_string(masters[i].port());
}

// redlock VERB -m URI... ARGS...
std::vector<std::string> command_line(const std::string& verb, Cluster& masters,
                                      std::vector<std::string> args) {
  std::vector<std::string> argv = {cli(), verb};
  for (std::size_t i = 0; i < masters.size(); ++i) {
    argv.push_back("-m");
    argv.push_back(uri(masters, i));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// A temporary directory for the files CMDs write, removed at scope exit.
class Dir {
 public:
  Dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "redlock-cli.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~Dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;

  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has_line(const std::string& path) {
  std::string text = read_file(path);
  return !text.empty() && text.back() == '\n';
}

// Opens `fifo` for writing once a reader has it open and writes a line: lets
// a CMD blocked in `read x < fifo` go on. False if no reader came in time.
bool release_reader(const std::string& fifo) {
  int fd = -1;
  eventually([&] {
    fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    return fd >= 0;
  });
  if (fd < 0) return false;
  bool wrote = ::write(fd, "go\n", 3) == 3;
  ::close(fd);
  return wrote;
}

// KEY=value lines (as acquire prints them).
std::map<std::string, std::string> assignments(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// A waiter for `key` that was refused subscribes its release channel on a
// majority of the masters, or is queued at the key's gate master (and then
// unsubscribes): either way it has tried and is waiting.
bool waiting_on(Cluster& masters, const std::string& key) {
  return !masters.subscribed_on(key + ":released", 1).empty() || !masters.queued_on(key, 1).empty();
}

// A CMD that writes its lock value to `ready` and then blocks reading `fifo`
// until the test lets it go; it exits 0 after that.
std::vector<std::string> blocking_cmd(const std::string& ready, const std::string& fifo) {
  return {"--", "/bin/sh", "-c", "echo \"$REDLOCK_VALUE\" > \"$0\"; read x < \"$1\"", ready, fifo};
}

}  // namespace

TEST_CASE("redlock run gives CMD the lock, passes its exit status through and releases", "[cli]") {
  Cluster masters(3);
  auto done = run_command(command_line(
      "run", masters,
      {"--ttl", "20s", "jobs", "--", "/bin/sh", "-c",
       "echo \"$REDLOCK_RESOURCE $REDLOCK_VALUE $REDLOCK_TTL_MS ${REDLOCK_VALIDITY_MS:-none}\"; exit 7"}));
  CHECK(done.status == 7);
  INFO(done.err);
  std::istringstream words(done.out);
  std::string resource, value, ttl, validity;
  words >> resource >> value >> ttl >> validity;
  CHECK(resource == "jobs");
  CHECK(value.size() > 23);  // 22 random base64url characters, then when and by whom
  CHECK(ttl == "20000");
  REQUIRE(validity != "none");
  CHECK(std::stol(validity) > 0);
  CHECK(std::stol(validity) <= 20000);
  CHECK(held_nowhere(masters, "{jobs}"));

  SECTION("a CMD ended by a signal gives 128 + N, like a shell") {
    auto killed = run_command(command_line("run", masters, {"jobs", "--", "/bin/sh", "-c", "kill -USR1 $$"}));
    CHECK(killed.status == 128 + SIGUSR1);
    CHECK(held_nowhere(masters, "{jobs}"));
  }
}

TEST_CASE("--fencing gives each grant a larger token; without it CMD sees none", "[cli]") {
  Cluster masters(3);
  const std::vector<std::string> print_token = {"jobs", "--", "/bin/sh", "-c",
                                                "echo \"${REDLOCK_FENCING_TOKEN:-none}\""};
  auto plain = run_command(command_line("run", masters, print_token));
  REQUIRE(plain.status == 0);
  CHECK(plain.out == "none\n");

  std::vector<std::string> fenced = {"--fencing"};
  fenced.insert(fenced.end(), print_token.begin(), print_token.end());
  auto first = run_command(command_line("run", masters, fenced));
  auto second = run_command(command_line("run", masters, fenced));
  REQUIRE(first.status == 0);
  REQUIRE(second.status == 0);
  INFO(first.out << second.out);
  const unsigned long long one = std::stoull(first.out);
  const unsigned long long two = std::stoull(second.out);
  CHECK(one > 0);
  CHECK(two > one);

  auto acquired = run_command(command_line("acquire", masters, {"--fencing", "--ttl", "10s", "jobs"}));
  REQUIRE(acquired.status == 0);
  auto lock = assignments(acquired.out);
  REQUIRE(lock.count("REDLOCK_FENCING_TOKEN") == 1);
  CHECK(std::stoull(lock["REDLOCK_FENCING_TOKEN"]) > two);
  CHECK(run_command(command_line("release", masters, {"jobs", lock["REDLOCK_VALUE"]})).status == 0);
}

TEST_CASE("two redlock run processes exclude each other", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);

  Command first(command_line("run", masters, [&] {
    std::vector<std::string> args = {"jobs"};
    for (auto& a : blocking_cmd(dir / "first", dir / "fifo")) args.push_back(a);
    return args;
  }()));
  REQUIRE(eventually([&] { return has_line(dir / "first"); }, 10s));
  std::string first_value = read_file(dir / "first");
  first_value.pop_back();
  CHECK(holders(masters, "{jobs}", first_value) == 3);

  // The second may enter only once the first CMD has written "out".
  Command second(command_line(
      "run", masters,
      {"jobs", "--", "/bin/sh", "-c", "test -e \"$0\" || exit 9; echo \"$REDLOCK_VALUE\" > \"$1\"",
       dir / "out", dir / "second"}));
  REQUIRE(eventually([&] { return waiting_on(masters, "{jobs}"); }, 10s));
  CHECK_FALSE(second.exited());

  { std::ofstream out(dir / "out"); }
  REQUIRE(release_reader(dir / "fifo"));
  CHECK(first.wait(10s) == 0);
  CHECK(second.wait(10s) == 0);
  INFO(second.err());
  std::string second_value = read_file(dir / "second");
  CHECK(second_value.size() > 34);
  CHECK(second_value != first_value + "\n");
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("redlock run --shared: readers run together, and a writer waits for both", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo-a").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((dir / "fifo-b").c_str(), 0600) == 0);
  auto reader = [&](const std::string& name) {
    std::vector<std::string> args = {"--shared", "jobs"};
    for (auto& a : blocking_cmd(dir / name, dir / ("fifo-" + name))) args.push_back(a);
    return args;
  };
  Command a(command_line("run", masters, reader("a")));
  Command b(command_line("run", masters, reader("b")));
  REQUIRE(eventually([&] { return has_line(dir / "a") && has_line(dir / "b"); }, 10s));  // both inside
  CHECK(holders(masters, "{jobs}", "redlock:shared") == 3);

  Command writer(command_line(
      "run", masters, {"-w", "20s", "jobs", "--", "/bin/sh", "-c", "echo wrote > \"$0\"", dir / "writer"}));
  REQUIRE(eventually([&] { return masters[0].command({"EXISTS", "{jobs}:writer-waiting"}) == "1"; }, 10s));
  Command late(command_line("run", masters, {"-n", "--shared", "jobs", "--", "true"}));
  CHECK(late.wait(10s) == 1);  // a new reader is kept out while the writer waits
  REQUIRE(release_reader(dir / "fifo-a"));
  CHECK(a.wait(10s) == 0);
  CHECK_FALSE(writer.exited());  // b still reads
  REQUIRE(release_reader(dir / "fifo-b"));
  CHECK(b.wait(10s) == 0);
  CHECK(writer.wait(10s) == 0);
  INFO(writer.err());
  CHECK(read_file(dir / "writer") == "wrote\n");
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("redlock run --permits N: at most N inside, each told its permit", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo-first").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((dir / "fifo-second").c_str(), 0600) == 0);
  const std::vector<std::string> tell = {"--", "/bin/sh", "-c",
                                         "echo \"$REDLOCK_PERMIT\" > \"$0\"; read x < \"$1\""};
  auto holder = [&](const std::string& name) {
    std::vector<std::string> args = {"--permits", "2", "pool"};
    for (const auto& a : tell) args.push_back(a);
    args.push_back(dir / name);
    args.push_back(dir / ("fifo-" + name));
    return args;
  };
  Command first(command_line("run", masters, holder("first")));
  Command second(command_line("run", masters, holder("second")));
  REQUIRE(eventually([&] { return has_line(dir / "first") && has_line(dir / "second"); }, 10s));
  std::set<std::string> permits = {read_file(dir / "first"), read_file(dir / "second")};
  CHECK(permits == std::set<std::string>{"0\n", "1\n"});
  Command third(command_line("run", masters, {"-n", "--permits", "2", "pool", "--", "true"}));
  CHECK(third.wait(10s) == 1);  // both permits held
  REQUIRE(release_reader(dir / "fifo-first"));
  REQUIRE(release_reader(dir / "fifo-second"));
  CHECK(first.wait(10s) == 0);
  CHECK(second.wait(10s) == 0);
  CHECK(held_nowhere(masters, "{pool}:permit:0"));
  CHECK(held_nowhere(masters, "{pool}:permit:1"));
}

TEST_CASE("redlock run --also takes several resources, all or none", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  std::vector<std::string> args = {"--also", "b", "--also", "c", "a"};
  for (auto& a : blocking_cmd(dir / "ready", dir / "fifo")) args.push_back(a);
  Command both(command_line("run", masters, args));
  REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));
  std::string value = read_file(dir / "ready");
  value.pop_back();
  for (const char* key : {"{a}", "{b}", "{c}"}) CHECK(holders(masters, key, value) == 3);
  Command other(command_line("run", masters, {"-n", "c", "--", "true"}));
  CHECK(other.wait(10s) == 1);
  REQUIRE(release_reader(dir / "fifo"));
  CHECK(both.wait(10s) == 0);
  for (const char* key : {"{a}", "{b}", "{c}"}) CHECK(held_nowhere(masters, key));
}

TEST_CASE("redlock run --elect leads while CMD runs; redlock leader says who leads, --watch follows",
          "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  Command watcher(command_line("leader", masters, {"--watch", "--json", "sched"}));
  Command none(command_line("leader", masters, {"sched"}));
  CHECK(none.wait(10s) == 1);
  CHECK(none.out() == "sched: no leader\n");
  // The watcher reported the start (no leader) before anyone leads: on a busy
  // machine it may start later than the leader below would.
  REQUIRE(eventually([&] { return watcher.out().find("\"leader\":null}") != std::string::npos; }, 10s));

  std::vector<std::string> args = {
      "--elect",    "--owner",   "node-a", "sched",
      "--",         "/bin/sh",   "-c",     "echo \"$REDLOCK_FENCING_TOKEN\" > \"$0\"; read x < \"$1\"",
      dir / "term", dir / "fifo"};
  Command leader(command_line("run", masters, args));
  REQUIRE(eventually([&] { return has_line(dir / "term"); }, 10s));
  std::string term = read_file(dir / "term");
  term.pop_back();
  CHECK(term.size() > 10);
  Command who(command_line("leader", masters, {"sched"}));
  CHECK(who.wait(10s) == 0);
  CHECK(who.out() == "sched: led by node-a (term " + term + "), value \n");
  Command second(command_line("run", masters, {"-n", "--elect", "sched", "--", "true"}));
  CHECK(second.wait(10s) == 1);  // one leader

  REQUIRE(release_reader(dir / "fifo"));
  CHECK(leader.wait(10s) == 0);
  Command after(command_line("leader", masters, {"sched"}));
  CHECK(after.wait(10s) == 1);
  REQUIRE(eventually([&] { return watcher.out().find("\"leader\":null}\n", 10) != std::string::npos; }, 5s));
  ::kill(watcher.pid(), SIGINT);
  CHECK(watcher.wait(10s) == 0);
  const std::string lines = watcher.out();
  CHECK(lines.find("{\"election\":\"sched\",\"leader\":null}") == 0);
  CHECK(lines.find("\"id\":\"node-a\",\"value\":\"\",\"term\":" + term) != std::string::npos);
}

TEST_CASE("-n and -w give the conflict status while another holds the lock", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  std::vector<std::string> hold = {"jobs"};
  for (auto& a : blocking_cmd(dir / "ready", dir / "fifo")) hold.push_back(a);
  Command holder(command_line("run", masters, hold));
  REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));

  SECTION("-n: one attempt, status 1") {
    auto once = run_command(command_line("run", masters, {"-n", "jobs", "--", "/bin/sh", "-c", "exit 0"}));
    CHECK(once.status == 1);
    CHECK(once.err.empty());  // as flock -n: a cron job on the losing hosts mails nothing
    auto told = run_command(command_line("run", masters, {"-nv", "jobs", "--", "/bin/sh", "-c", "exit 0"}));
    CHECK(told.status == 1);
    CHECK_THAT(told.err, Catch::Contains("held by another owner"));
  }
  SECTION("-E changes it") {
    auto once =
        run_command(command_line("run", masters, {"-n", "-E", "9", "jobs", "--", "/bin/sh", "-c", "exit 0"}));
    CHECK(once.status == 9);
  }
  SECTION("-w: waits that long, then status 1") {
    auto start = std::chrono::steady_clock::now();
    auto waited = run_command(
        command_line("run", masters, {"-w0.3", "--verbose", "jobs", "--", "/bin/sh", "-c", "exit 0"}));
    CHECK(waited.status == 1);
    CHECK(std::chrono::steady_clock::now() - start >= 300ms);
    CHECK_THAT(waited.err, Catch::Contains("gave up after 300ms"));
  }
  SECTION("acquire -n too") {
    auto once = run_command(command_line("acquire", masters, {"-n", "jobs"}));
    CHECK(once.status == 1);
    CHECK(once.out == "false\n");  // eval "$(...)" fails
  }
  REQUIRE(release_reader(dir / "fifo"));
  CHECK(holder.wait(10s) == 0);
}

TEST_CASE("SIGINT, SIGTERM and SIGHUP reach CMD", "[cli]") {
  Cluster masters(3);
  Dir dir;
  int signum = GENERATE(SIGINT, SIGTERM, SIGHUP);
  INFO("signal " << signum);
  // CMD exits 42 on the signal: a status redlock itself could not produce by dying of it.
  Command run(command_line(
      "run", masters,
      {"jobs", "--", "/bin/sh", "-c",
       "trap 'exit 42' INT TERM HUP; echo in > \"$0\"; while :; do sleep 1 & wait $!; done", dir / "ready"}));
  REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));
  run.signal(signum);
  CHECK(run.wait(10s) == 42);
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("a signal while waiting for the lock ends the wait", "[cli]") {
  Cluster masters(3);
  Dir dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  std::vector<std::string> hold = {"jobs"};
  for (auto& a : blocking_cmd(dir / "ready", dir / "fifo")) hold.push_back(a);
  Command holder(command_line("run", masters, hold));
  REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));

  Command waiter(command_line("run", masters, {"jobs", "--", "/bin/sh", "-c", "exit 0"}));
  REQUIRE(eventually([&] { return waiting_on(masters, "{jobs}"); }, 10s));
  waiter.signal(SIGTERM);
  CHECK(waiter.wait(10s) == 128 + SIGTERM);
  REQUIRE(release_reader(dir / "fifo"));
  CHECK(holder.wait(10s) == 0);
}

TEST_CASE("a CMD that cannot run gives 127 or 126 and releases the lock", "[cli]") {
  Cluster masters(3);
  Dir dir;
  SECTION("not found: 127") {
    auto done = run_command(command_line("run", masters, {"jobs", "--", "redlock-no-such-command-here"}));
    CHECK(done.status == 127);
    CHECK_THAT(done.err, Catch::Contains("redlock-no-such-command-here: command not found"));
  }
  SECTION("not executable: 126") {
    { std::ofstream plain(dir / "plain"); }
    auto done = run_command(command_line("run", masters, {"jobs", "--", dir / "plain"}));
    CHECK(done.status == 126);
  }
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("a lock lost while CMD runs stops CMD and exits 75", "[cli]") {
  Cluster masters(3);
  Dir dir;
  SECTION("CMD ends at SIGTERM") {
    Command run(command_line("run", masters,
                             {"--ttl", "900ms", "jobs", "--", "/bin/sh", "-c",
                              "echo in > \"$0\"; while :; do sleep 1 & wait $!; done", dir / "ready"}));
    REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].kill9();
    CHECK(run.wait(10s) == 75);
    CHECK_THAT(run.err(), Catch::Contains("lost the lock on 'jobs'"));
    CHECK_THAT(run.err(), Catch::Contains("sending SIGTERM"));
  }
  SECTION("CMD ignores SIGTERM: SIGKILL after --kill-after") {
    Command run(
        command_line("run", masters,
                     {"--ttl", "900ms", "--kill-after", "300ms", "jobs", "--", "/bin/sh", "-c",
                      "trap '' TERM; echo in > \"$0\"; while :; do sleep 1 & wait $!; done", dir / "ready"}));
    REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].kill9();
    CHECK(run.wait(10s) == 75);
    CHECK_THAT(run.err(), Catch::Contains("sending SIGKILL"));
  }
}

TEST_CASE("too few masters reachable: status 69", "[cli]") {
  Cluster masters(3);
  masters[0].kill9();
  masters[1].kill9();
  auto run = run_command(command_line("run", masters, {"-n", "jobs", "--", "/bin/sh", "-c", "exit 0"}));
  CHECK(run.status == 69);
  CHECK_THAT(run.err, Catch::Contains("too few masters"));
  auto acquire = run_command(command_line("acquire", masters, {"-w", "200ms", "jobs"}));
  CHECK(acquire.status == 69);
}

TEST_CASE("while waiting on a terminal, one status line says who holds the lock", "[cli]") {
  Cluster masters(3);
  auto held =
      run_command(command_line("acquire", masters, {"--ttl", "1m", "--owner", "nightly backup", "jobs"}));
  REQUIRE(held.status == 0);
  std::vector<std::string> waiter =
      command_line("run", masters,
                   {"--connect-timeout", "2s", "-w",
                    std::to_string(redlock::test::scaled(1500ms).count()) + "ms", "jobs", "--", "/bin/true"});

  SECTION("stderr a terminal (script(1) gives it one)") {
    std::string line;
    for (const auto& a : waiter) line += a + " ";
    auto done = run_command({"/usr/bin/script", "-qec", line, "/dev/null"});
    CHECK(done.status == 1);
    CHECK_THAT(done.out, Catch::Contains("redlock: waiting "));
    CHECK_THAT(done.out, Catch::Contains("for 'jobs': held by nightly backup on 3 of 3 masters"));
    CHECK_THAT(done.out, Catch::Contains("s left"));
  }
  SECTION("stderr a file: nothing but the outcome") {
    auto done = run_command(waiter);
    CHECK(done.status == 1);
    CHECK_THAT(done.err, !Catch::Contains("waiting"));
    CHECK(done.err.empty());  // a conflict is silent, as with flock
  }
}

TEST_CASE("acquire, extend and release hold a lock across commands", "[cli]") {
  Cluster masters(3);
  auto acquired = run_command(command_line("acquire", masters, {"--ttl", "10s", "jobs"}));
  REQUIRE(acquired.status == 0);
  auto lock = assignments(acquired.out);
  CHECK(lock["REDLOCK_RESOURCE"] == "jobs");
  const std::string value = lock["REDLOCK_VALUE"];
  REQUIRE(value.size() > 33);
  CHECK(lock["REDLOCK_TTL_MS"] == "10000");
  CHECK(std::stol(lock["REDLOCK_VALIDITY_MS"]) > 0);
  CHECK(holders(masters, "{jobs}", value) == 3);
  CHECK(masters[0].pttl("{jobs}") <= 10000);

  // Masters from REDLOCK_MASTERS this time.
  std::vector<std::string> env = {"REDLOCK_MASTERS=" + uri(masters, 0) + "," + uri(masters, 1) + "," +
                                  uri(masters, 2)};
  auto other = run_command({cli(), "acquire", "-n", "jobs"}, env);
  CHECK(other.status == 1);

  auto extended = run_command({cli(), "extend", "jobs", value, "--ttl", "1m"}, env);
  CHECK(extended.status == 0);
  CHECK(assignments(extended.out)["REDLOCK_VALUE"] == value);
  CHECK(masters[0].pttl("{jobs}") > 10000);

  auto released = run_command({cli(), "release", "jobs", value}, env);
  CHECK(released.status == 0);
  CHECK(held_nowhere(masters, "{jobs}"));

  auto again = run_command({cli(), "release", "jobs", value}, env);
  CHECK(again.status == 1);
  CHECK_THAT(again.err, Catch::Contains("release 'jobs'"));
  auto late = run_command({cli(), "extend", "jobs", value, "--ttl", "1m"}, env);
  CHECK(late.status == 1);
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("status RESOURCE says who holds it, how, for how long, with which token and how many wait",
          "[cli]") {
  Cluster masters(3);
  auto acquired = run_command(command_line(
      "acquire", masters, {"--ttl", "1m", "--fencing", "--owner", "nightly \"backup\"", "jobs"}));
  REQUIRE(acquired.status == 0);
  auto lock = assignments(acquired.out);
  // The owner's quote makes the value shell-quoted: what eval gives is the value.
  auto evaluated =
      run_command({"/bin/sh", "-c", "eval \"$1\" && printf %s \"$REDLOCK_VALUE\"", "sh", acquired.out});
  REQUIRE(evaluated.status == 0);
  lock["REDLOCK_VALUE"] = evaluated.out;
  CHECK_THAT(evaluated.out, Catch::EndsWith(":nightly \"backup\""));
  // A waiter queues on the resource's gate master.
  Command waiter(command_line("run", masters, {"-w", "30s", "jobs", "--", "/bin/true"}));
  REQUIRE(eventually([&] { return !masters.queued_on("{jobs}", 1).empty(); }, 10s));

  auto status = run_command(command_line("status", masters, {"--json", "jobs"}));
  REQUIRE(status.status == 0);
  INFO(status.out);
  Json report = Json::parse(status.out);
  const Json& jobs = report["resources"][0];
  CHECK(jobs["owner"].string == "nightly \"backup\"");
  CHECK(jobs["mode"].string == "exclusive");
  CHECK(jobs["value"].string == lock["REDLOCK_VALUE"]);
  CHECK(jobs["fencing_token"].number == std::stod(lock["REDLOCK_FENCING_TOKEN"]));
  CHECK(jobs["waiting"].number == 1);
  CHECK(jobs["held_ms"].number >= 0);
  CHECK(jobs["held_ms"].number < 60000);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  CHECK(jobs["since_unix_ms"].number <= static_cast<double>(now_ms));
  CHECK(jobs["since_unix_ms"].number > static_cast<double>(now_ms - 60000));

  auto text = run_command(command_line("status", masters, {"jobs"}));
  CHECK_THAT(text.out, Catch::Contains("resource jobs: held by nightly \"backup\" (exclusive) for "));
  CHECK_THAT(text.out, Catch::Contains(", on 3 of 3 masters, last fencing token " +
                                       lock["REDLOCK_FENCING_TOKEN"] + ", 1 waiting\n"));

  SECTION("the default owner is the host name and the pid of redlock") {
    CHECK(run_command(command_line("release", masters, {"jobs", lock["REDLOCK_VALUE"]})).status == 0);
    REQUIRE(waiter.wait(10s) == 0);
    auto taken = run_command(command_line("acquire", masters, {"--ttl", "1m", "jobs"}));
    REQUIRE(taken.status == 0);
    auto free_text = run_command(command_line("status", masters, {"jobs"}));
    char host[256] = {};
    REQUIRE(::gethostname(host, sizeof host - 1) == 0);
    CHECK_THAT(free_text.out, Catch::Contains("resource jobs: held by " + std::string(host) + ":"));
    // The waiter is gone. An entry of it still in the gate's queue (seen
    // once under ASan; how it got there is not known) leaves when the queue
    // expires, retry_delay + retry_jitter + 1 s after its last refusal.
    CHECK(eventually(
        [&] {
          return run_command(command_line("status", masters, {"jobs"})).out.find(", 0 waiting\n") !=
                 std::string::npos;
        },
        5s));
  }
  SECTION("a bad owner is refused before anything is taken") {
    auto bad = run_command(command_line("acquire", masters, {"--owner", std::string(300, 'x'), "other"}));
    CHECK(bad.status == 64);
    CHECK_THAT(bad.err, Catch::Contains("--owner must be at most 256 bytes"));
    auto empty = run_command(command_line("acquire", masters, {"--owner", "", "other"}));
    CHECK(empty.status == 64);
    CHECK(held_nowhere(masters, "{other}"));
    CHECK(run_command(command_line("release", masters, {"jobs", lock["REDLOCK_VALUE"]})).status == 0);
    REQUIRE(waiter.wait(10s) == 0);
  }
}

TEST_CASE("status --json describes masters and resources", "[cli]") {
  Cluster masters(3);
  auto acquired = run_command(command_line("acquire", masters, {"--ttl", "30s", "--owner", "web-1", "jobs"}));
  REQUIRE(acquired.status == 0);
  const std::string value = assignments(acquired.out)["REDLOCK_VALUE"];
  masters[2].kill9();

  auto asked = std::chrono::steady_clock::now();
  auto status =
      run_command(command_line("status", masters, {"--connect-timeout", "5s", "--json", "jobs", "free"}));
  // The killed master refuses connections: status need not wait for the 5 s.
  CHECK(std::chrono::steady_clock::now() - asked < 2500ms);
  CHECK(status.status == 2);  // 2 of 3 still vote: degraded
  INFO(status.out);
  Json report = Json::parse(status.out);
  CHECK(report["quorum"].number == 2);
  CHECK(report["voting"].number == 2);
  REQUIRE(report["masters"].array.size() == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    const Json& m = report["masters"][i];
    CHECK(m["endpoint"].string == uri(masters, i));
    CHECK(m["reachable"].boolean);
    CHECK(m["role"].string == "master");
    CHECK(m["uptime_s"].number >= 0);
    CHECK_FALSE(m["quarantined"].boolean);
    CHECK(m["maxmemory_policy"].string == "noeviction");
    CHECK(m["rtt_us"].number > 0);
  }
  CHECK_FALSE(report["masters"][2]["reachable"].boolean);
  // Why, not only that it did not answer in time.
  CHECK_THAT(report["masters"][2]["error"].string, Catch::Contains("connection refused"));

  REQUIRE(report["resources"].array.size() == 2);
  const Json& jobs = report["resources"][0];
  CHECK(jobs["resource"].string == "jobs");
  CHECK(jobs["value"].string == value);
  CHECK(jobs["holders"].number == 2);
  CHECK(jobs["held"].boolean);
  CHECK(jobs["ttl_ms"].number > 0);
  CHECK(jobs["ttl_ms"].number <= 30000);
  CHECK(jobs["masters"][0]["value"].string == value);
  CHECK(jobs["masters"][2]["value"].is_null());
  const Json& free = report["resources"][1];
  CHECK(free["value"].is_null());
  CHECK(free["holders"].number == 0);
  CHECK_FALSE(free["held"].boolean);

  SECTION("the text form says the same") {
    auto text = run_command(command_line("status", masters, {"--connect-timeout", "2s", "jobs"}));
    CHECK(text.status == 2);
    CHECK_THAT(text.out, Catch::Contains("masters: 2 of 3 voting, a quorum is 2"));
    CHECK_THAT(text.out, Catch::Contains("resource jobs: held by web-1 (exclusive) for "));
    CHECK_THAT(text.out, Catch::Contains("s left, on 2 of 3 masters, 0 waiting\n"));
    CHECK_THAT(text.out, Catch::Contains(uri(masters, 0) + "  " + value + ", "));
    CHECK_THAT(text.out, Catch::Contains(uri(masters, 2) + "  unreachable"));
  }
  SECTION("every master votes: status 0") {
    masters[2].restart(false);
    REQUIRE(eventually(
        [&] {
          return run_command(command_line("status", masters, {"--connect-timeout", "2s"})).status == 0;
        },
        10s));
  }
  SECTION("without a quorum of masters: status 69") {
    masters[1].kill9();
    auto down = run_command(command_line("status", masters, {"--connect-timeout", "2s", "--json"}));
    CHECK(down.status == 69);
    CHECK(Json::parse(down.out)["voting"].number == 1);
  }
}

TEST_CASE("bad input: one line saying what is wrong, the usage line, status 64", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", "-m", "redis://127.0.0.1:1", "--bogus", "jobs", "--", "true"}, "unknown option '--bogus'"},
      {{"run", "-m", "http://127.0.0.1", "jobs", "--", "true"}, "invalid redis URI 'http://127.0.0.1'"},
      {{"run", "-m", "redis://127.0.0.1:1", "--ttl", "30x", "jobs", "--", "true"}, "'30x': unknown unit"},
      {{"run", "-m", "redis://127.0.0.1:1", "-w", "five", "jobs", "--", "true"}, "'five' is not a duration"},
      {{"run", "-m", "redis://127.0.0.1:1", "jobs", "true"}, "missing '--' before the command"},
      {{"acquire", "jobs"}, "no masters"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{}, "no command given"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {cli()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    INFO(c.message);
    auto done = run_command(argv, {"REDLOCK_MASTERS="});
    CHECK(done.status == 64);
    // acquire's and extend's stdout is for eval: there it must fail.
    CHECK(done.out == (c.args.size() > 0 && c.args[0] == "acquire" ? "false\n" : ""));
    CHECK_THAT(done.err, Catch::StartsWith("redlock: ") && Catch::Contains(c.message));
    std::string second_line = done.err.substr(done.err.find('\n') + 1);
    CHECK_THAT(second_line, Catch::StartsWith("usage: redlock"));
    CHECK(std::count(done.err.begin(), done.err.end(), '\n') == 2);
  }
}

TEST_CASE("--help for each subcommand and --version", "[cli]") {
  for (std::string verb : {"run", "acquire", "extend", "release", "status"}) {
    INFO(verb);
    auto help = run_command({cli(), verb, "--help"});
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Catch::StartsWith("usage: redlock " + verb));
    CHECK_THAT(help.out, Catch::Contains("Exit status:"));
  }
  auto overview = run_command({cli(), "--help"});
  CHECK(overview.status == 0);
  CHECK_THAT(overview.out, Catch::Contains("run RESOURCE -- CMD"));
  auto version = run_command({cli(), "--version"});
  CHECK(version.status == 0);
  CHECK_THAT(version.out, Catch::StartsWith("redlock "));
}

namespace {

// The process is gone (or a zombie nobody reaped yet: it runs no more).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

// `run` arguments `options` (and RESOURCE), then a CMD whose work outlives
// its shell: the shell waits for a background sleep, whose pid it writes to
// `pid_file` first.
std::vector<std::string> shell_with_work(std::vector<std::string> options, const std::string& pid_file,
                                         const std::string& traps = "") {
  for (std::string arg : {"--", "/bin/sh", "-c"}) options.push_back(arg);
  options.push_back(traps + "sleep 30 & echo $! > \"$0\"; wait");
  options.push_back(pid_file);
  return options;
}

pid_t read_pid(const std::string& path) {
  return static_cast<pid_t>(std::stol(read_file(path)));
}

// The pid shell_with_work's work wrote to `path`, once it runs.
pid_t await_work(const std::string& path) {
  REQUIRE(eventually([&] { return has_line(path); }, 10s));
  return read_pid(path);
}

// The guardian: the only child of `redlock run`.
pid_t guardian_of(const Command& run) {
  std::string pid = std::to_string(run.pid());
  std::string children = read_file("/proc/" + pid + "/task/" + pid + "/children");
  REQUIRE_FALSE(children.empty());
  return static_cast<pid_t>(std::stol(children));
}

}  // namespace

// Issue 22, item 1.
TEST_CASE("a lost lock stops CMD's whole process group before anyone else gets the lock",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  Command run(command_line("run", masters, shell_with_work({"--ttl", "900ms", "jobs"}, dir / "work")));
  pid_t work = await_work(dir / "work");
  for (std::size_t i = 1; i < 3; ++i) masters[i].pause();
  CHECK(run.wait(10s) == 75);
  CHECK(process_gone(work));
  for (std::size_t i = 1; i < 3; ++i) masters[i].resume();
  // Someone else gets the lock, but only once the first CMD's work is gone.
  REQUIRE(eventually(
      [&] {
        return run_command(command_line("acquire", masters, {"-n", "--ttl", "10s", "jobs"})).status == 0;
      },
      10s));
  CHECK(process_gone(work));
}

// Issue 22, item 2.
TEST_CASE("a CMD that ignores SIGTERM is killed before the lock's validity ends, not at --kill-after",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  // --kill-after stays 10 s.
  Command run(
      command_line("run", masters, shell_with_work({"--ttl", "3s", "jobs"}, dir / "work", "trap '' TERM; ")));
  REQUIRE(eventually([&] { return has_line(dir / "work"); }, 10s));
  auto started = std::chrono::steady_clock::now();
  pid_t work = read_pid(dir / "work");
  for (std::size_t i = 1; i < 3; ++i) masters[i].pause();
  CHECK(run.wait(10s) == 75);
  CHECK(std::chrono::steady_clock::now() - started < 3s);  // the lock's ttl
  CHECK(process_gone(work));
  CHECK_THAT(run.err(), Catch::Contains("sending SIGKILL"));
  for (std::size_t i = 1; i < 3; ++i) masters[i].resume();
}

// Issue 22, item 3.
TEST_CASE("redlock run dies: CMD's group stops within a second; signals it would die of reach CMD",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  SECTION("SIGKILL of redlock") {
    Command run(command_line("run", masters, shell_with_work({"jobs"}, dir / "work")));
    pid_t work = await_work(dir / "work");
    ::kill(run.pid(), SIGKILL);
    CHECK(eventually([&] { return process_gone(work); }, 1s));
  }
  SECTION("SIGUSR1, SIGUSR2, SIGQUIT, SIGALRM are passed on") {
    int signum = GENERATE(SIGUSR1, SIGUSR2, SIGQUIT, SIGALRM);
    INFO("signal " << signum);
    Command run(command_line(
        "run", masters,
        {"jobs", "--", "/bin/sh", "-c",
         "trap 'exit 42' USR1 USR2 QUIT ALRM; echo in > \"$0\"; while :; do sleep 1 & wait $!; done",
         dir / "ready"}));
    REQUIRE(eventually([&] { return has_line(dir / "ready"); }, 10s));
    ::kill(run.pid(), signum);
    CHECK(run.wait(10s) == 42);
    CHECK(held_nowhere(masters, "{jobs}"));
  }
}

// Issue 22, item 4.
TEST_CASE("a failed acquire makes eval fail, so a set -e script stops", "[cli][run-safety]") {
  Cluster masters(3);
  auto held = run_command(command_line("acquire", masters, {"--ttl", "10s", "jobs"}));
  REQUIRE(held.status == 0);
  auto refused = run_command(command_line("acquire", masters, {"-n", "jobs"}));
  CHECK(refused.status == 1);
  CHECK(refused.out == "false\n");
  auto script = run_command({"/bin/sh", "-c", "set -e; eval \"$1\"; echo DEPLOYING", "sh", refused.out});
  CHECK(script.status != 0);
  CHECK(script.out.find("DEPLOYING") == std::string::npos);
}

// Issue 22, item 8.
TEST_CASE("REDLOCK_PASSWORD reaches the masters, and neither it nor REDLOCK_MASTERS reaches CMD", "[cli]") {
  redlock::test::ServerOptions with_password;
  with_password.password = "s3cret-pw";
  Cluster masters(3, with_password);
  std::string list;
  for (std::size_t i = 0; i < masters.size(); ++i) list += (i ? "," : "") + uri(masters, i);
  auto done = run_command({cli(), "run", "jobs", "--", "/bin/sh", "-c",
                           "echo \"${REDLOCK_PASSWORD:-none} ${REDLOCK_MASTERS:-none}\""},
                          {"REDLOCK_MASTERS=" + list, "REDLOCK_PASSWORD=s3cret-pw"});
  INFO(done.err);
  CHECK(done.status == 0);
  CHECK(done.out == "none none\n");
  auto refused = run_command({cli(), "acquire", "-n", "jobs"}, {"REDLOCK_MASTERS=" + list});
  CHECK(refused.status == 69);
  CHECK_THAT(refused.err, Catch::Contains("REDLOCK_PASSWORD"));
  CHECK_THAT(refused.err, !Catch::Contains("redis://:password@host"));
}

// Issue 22, item 10.
TEST_CASE("the redlock binary runs from anywhere with a clean environment", "[cli]") {
  Dir dir;
  std::filesystem::copy_file(cli(), dir / "redlock");
  std::filesystem::permissions(dir / "redlock", std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  auto version = run_command({"/usr/bin/env", "-i", dir / "redlock", "--version"});
  INFO(version.err);
  CHECK(version.status == 0);
  CHECK_THAT(version.out, Catch::StartsWith("redlock "));
}

// From the review of issue 22's fixes: CMDs that leave the process group
// (timeout, set -m, interactive shells) are still stopped with the lock.
TEST_CASE("a CMD that moves its work to another process group is still stopped when the lock is lost",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  // timeout(1) puts itself in a group of its own, and ignores nothing.
  Command run(command_line("run", masters,
                           {"--ttl", "900ms", "jobs", "--", "timeout", "60", "/bin/sh", "-c",
                            "sleep 30 & echo $! > \"$0\"; trap '' TERM; wait", dir / "work"}));
  pid_t work = await_work(dir / "work");
  for (std::size_t i = 1; i < 3; ++i) masters[i].pause();
  CHECK(run.wait(10s) == 75);
  CHECK(process_gone(work));
  for (std::size_t i = 1; i < 3; ++i) masters[i].resume();
}

TEST_CASE("redlock stopped: the guardian still kills CMD before the lock's validity ends",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  Command run(command_line("run", masters, shell_with_work({"--ttl", "1s", "jobs"}, dir / "work")));
  pid_t work = await_work(dir / "work");
  auto stopped = std::chrono::steady_clock::now();
  ::kill(run.pid(), SIGSTOP);  // no renewals, no timers: only the guardian is left to act
  CHECK(eventually([&] { return process_gone(work); }, 3s));
  CHECK(std::chrono::steady_clock::now() - stopped < 1500ms);
  ::kill(run.pid(), SIGCONT);
  CHECK(run.wait(10s) == 75);
}

TEST_CASE("a signal right after start is not lost: CMD gets it as soon as it runs", "[cli][run-safety]") {
  Cluster masters(3);
  // The signal comes 0-19 ms after the start: while acquiring, while the
  // guardian starts, before CMD runs or just after. Each resource once: a
  // lock whose answer was on its way when the signal came is left to its ttl.
  for (int delay_ms = 0; delay_ms < 20; ++delay_ms) {
    INFO("signal after " << delay_ms << " ms");
    std::string resource = "early-" + std::to_string(delay_ms);
    auto started = std::chrono::steady_clock::now();
    Command run(command_line("run", masters, {"--ttl", "2s", resource, "--", "/bin/sh", "-c", "sleep 5"}));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));  // the timing under test, not a wait
    run.signal(SIGTERM);
    CHECK(run.wait(10s) == 128 + SIGTERM);
    CHECK(std::chrono::steady_clock::now() - started < 4s);  // not after sleep 5 ran out
  }
}

TEST_CASE("standard descriptors: a closed stdin is no crash, and the caller's fd 3 reaches CMD",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  std::string redlock_run;
  for (const std::string& a : command_line("run", masters, {"jobs", "--"})) redlock_run += "'" + a + "' ";
  auto closed = run_command({"/bin/sh", "-c", redlock_run + "/bin/sh -c 'echo ran' <&-"});
  CHECK(closed.status == 0);
  CHECK(closed.out == "ran\n");
  auto fd3 =
      run_command({"/bin/sh", "-c", redlock_run + "/bin/sh -c 'echo via-fd3 >&3' 3>\"$0\"", dir / "out"});
  CHECK(fd3.status == 0);
  CHECK(read_file(dir / "out") == "via-fd3\n");
}

TEST_CASE("the guardian killed from outside: redlock kills what it left before releasing",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  Command run(command_line("run", masters, shell_with_work({"jobs"}, dir / "work")));
  pid_t work = await_work(dir / "work");
  ::kill(guardian_of(run), SIGKILL);
  CHECK(run.wait(10s) == 128 + SIGKILL);
  CHECK(process_gone(work));
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("a stopped guardian: redlock kills CMD's processes itself when the lock is lost",
          "[cli][run-safety]") {
  Cluster masters(3);
  Dir dir;
  Command run(command_line("run", masters, shell_with_work({"--ttl", "900ms", "jobs"}, dir / "work")));
  pid_t work = await_work(dir / "work");
  ::kill(guardian_of(run), SIGSTOP);
  for (std::size_t i = 1; i < 3; ++i) masters[i].pause();
  CHECK(run.wait(10s) == 75);
  CHECK(process_gone(work));
  for (std::size_t i = 1; i < 3; ++i) masters[i].resume();
}
