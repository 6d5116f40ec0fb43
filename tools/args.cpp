#include "args.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t max_ms = std::numeric_limits<std::int32_t>::max();

const char* verb_name(Verb verb) {
  switch (verb) {
    case Verb::run:
      return "run";
    case Verb::acquire:
      return "acquire";
    case Verb::extend:
      return "extend";
    case Verb::release:
      return "release";
    case Verb::status:
      return "status";
    case Verb::help:
      return "help";
    case Verb::version:
      return "version";
  }
  return "";
}

std::optional<Verb> verb_named(std::string_view name) {
  for (Verb v : {Verb::run, Verb::acquire, Verb::extend, Verb::release, Verb::status, Verb::help}) {
    if (name == verb_name(v)) return v;
  }
  return std::nullopt;
}

// Which subcommands take a flag.
enum Takes : unsigned {
  in_run = 1U << 0U,
  in_acquire = 1U << 1U,
  in_extend = 1U << 2U,
  in_release = 1U << 3U,
  in_status = 1U << 4U,
  in_all = in_run | in_acquire | in_extend | in_release | in_status,
};

unsigned bit(Verb verb) {
  switch (verb) {
    case Verb::run:
      return in_run;
    case Verb::acquire:
      return in_acquire;
    case Verb::extend:
      return in_extend;
    case Verb::release:
      return in_release;
    case Verb::status:
      return in_status;
    case Verb::help:
    case Verb::version:
      return 0;
  }
  return 0;
}

enum class Id {
  help,
  master,
  ttl,
  no_wait,
  wait,
  conflict_exit,
  kill_after,
  connect_timeout,
  command_timeout,
  key_prefix,
  quarantine,
  fencing,
  json,
  tls_ca,
  tls_cert,
  tls_key,
  tls_server_name,
  tls_insecure,
};

struct Flag {
  Id id;
  std::string_view long_name;
  char short_name;
  bool takes_value;
  unsigned verbs;
};

constexpr Flag flags[] = {
    {Id::help, "help", 'h', false, in_all},
    {Id::master, "master", 'm', true, in_all},
    {Id::ttl, "ttl", '\0', true, in_run | in_acquire | in_extend},
    {Id::no_wait, "nonblock", 'n', false, in_run | in_acquire},
    {Id::wait, "wait", 'w', true, in_run | in_acquire},
    {Id::conflict_exit, "conflict-exit-code", 'E', true, in_run | in_acquire},
    {Id::kill_after, "kill-after", '\0', true, in_run},
    {Id::connect_timeout, "connect-timeout", '\0', true, in_all},
    {Id::command_timeout, "command-timeout", '\0', true, in_all},
    {Id::key_prefix, "key-prefix", '\0', true, in_all},
    {Id::quarantine, "quarantine", '\0', true, in_all},
    {Id::fencing, "fencing", '\0', false, in_run | in_acquire},
    {Id::json, "json", '\0', false, in_status},
    {Id::tls_ca, "tls-ca", '\0', true, in_all},
    {Id::tls_cert, "tls-cert", '\0', true, in_all},
    {Id::tls_key, "tls-key", '\0', true, in_all},
    {Id::tls_server_name, "tls-server-name", '\0', true, in_all},
    {Id::tls_insecure, "tls-insecure", '\0', false, in_all},
};

const Flag* find_flag(std::string_view arg, Verb verb) {
  for (const Flag& f : flags) {
    if ((f.verbs & bit(verb)) == 0) continue;
    if (arg.size() > 2 && arg.substr(0, 2) == "--" && arg.substr(2) == f.long_name) return &f;
    if (f.short_name != '\0' && arg.size() == 2 && arg[0] == '-' && arg[1] == f.short_name) return &f;
  }
  return nullptr;
}

std::string flag_name(const Flag& f) {
  return "--" + std::string(f.long_name);
}

int parse_exit_code(std::string_view text, Verb verb) {
  int value = 0;
  bool ok = !text.empty() && text.size() <= 3;
  for (char c : text) {
    if (c < '0' || c > '9') ok = false;
    value = value * 10 + (c - '0');
  }
  if (!ok || value > 255) {
    throw UsageError(verb, "-E wants an exit status from 0 to 255, not '" + std::string(text) + "'");
  }
  return value;
}

void add_masters_from(std::string_view list, Options& options, Verb verb) {
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    try {
      options.masters.push_back(Endpoint::parse(item));
    } catch (const std::invalid_argument& e) {
      throw UsageError(verb, std::string("REDLOCK_MASTERS: ") + e.what());
    }
  }
}

void apply(Invocation& inv, const Flag& f, std::string_view value) {
  Verb verb = inv.verb;
  switch (f.id) {
    case Id::help:
      break;
    case Id::master:
      try {
        inv.options.masters.push_back(Endpoint::parse(value));
      } catch (const std::invalid_argument& e) {
        throw UsageError(verb, e.what());
      }
      break;
    case Id::ttl:
      inv.ttl = parse_duration(value, "--ttl", verb);
      if (inv.ttl.count() == 0) throw UsageError(verb, "--ttl must be more than 0ms");
      break;
    case Id::no_wait:
      inv.no_wait = true;
      break;
    case Id::wait:
      inv.wait = parse_duration(value, "-w", verb);
      break;
    case Id::conflict_exit:
      inv.conflict_exit = parse_exit_code(value, verb);
      break;
    case Id::kill_after:
      inv.kill_after = parse_duration(value, "--kill-after", verb);
      break;
    case Id::connect_timeout:
      inv.options.connect_timeout = parse_duration(value, "--connect-timeout", verb);
      if (inv.options.connect_timeout.count() == 0)
        throw UsageError(verb, "--connect-timeout must be more than 0ms");
      break;
    case Id::command_timeout:
      inv.options.command_timeout = parse_duration(value, "--command-timeout", verb);
      if (inv.options.command_timeout.count() == 0)
        throw UsageError(verb, "--command-timeout must be more than 0ms");
      break;
    case Id::key_prefix:
      inv.options.key_prefix = std::string(value);
      break;
    case Id::quarantine:
      inv.options.restart_quarantine = parse_duration(value, "--quarantine", verb);
      break;
    case Id::fencing:
      inv.options.fencing = true;
      break;
    case Id::json:
      inv.json = true;
      break;
    case Id::tls_ca:
      inv.options.tls.ca_file = std::string(value);
      break;
    case Id::tls_cert:
      inv.options.tls.cert_file = std::string(value);
      break;
    case Id::tls_key:
      inv.options.tls.key_file = std::string(value);
      break;
    case Id::tls_server_name:
      inv.options.tls.server_name = std::string(value);
      break;
    case Id::tls_insecure:
      inv.options.tls.verify_peer = false;
      break;
  }
}

void check_positionals(Invocation& inv, std::vector<std::string>& positional, bool saw_dashes) {
  Verb verb = inv.verb;
  auto need = [&](std::size_t n, const char* names) {
    if (positional.size() < n) throw UsageError(verb, std::string("missing ") + names);
    if (positional.size() > n) throw UsageError(verb, "unexpected argument '" + positional[n] + "'");
  };
  switch (verb) {
    case Verb::run:
      if (positional.empty()) throw UsageError(verb, "missing RESOURCE");
      if (positional.size() > 1 || !saw_dashes) throw UsageError(verb, "missing '--' before the command");
      if (inv.command.empty()) throw UsageError(verb, "missing the command after '--'");
      inv.resource = positional[0];
      break;
    case Verb::acquire:
      need(1, "RESOURCE");
      inv.resource = positional[0];
      break;
    case Verb::extend:
    case Verb::release:
      need(2, positional.empty() ? "RESOURCE and VALUE" : "VALUE");
      inv.resource = positional[0];
      inv.value = positional[1];
      if (inv.value.empty()) throw UsageError(verb, "VALUE must not be empty");
      break;
    case Verb::status:
      inv.resources = std::move(positional);
      break;
    case Verb::help:
    case Verb::version:
      break;
  }
  bool empty_resource = verb == Verb::status ? std::any_of(inv.resources.begin(), inv.resources.end(),
                                                           [](const std::string& r) { return r.empty(); })
                                             : inv.resource.empty();
  if (empty_resource) throw UsageError(verb, "RESOURCE must not be empty");
}

void check_options(Invocation& inv, const char* masters_env) {
  Verb verb = inv.verb;
  if (inv.no_wait && inv.wait) throw UsageError(verb, "-n and -w cannot be used together");
  if (inv.no_wait) inv.wait = milliseconds{0};
  if (inv.options.masters.empty() && masters_env != nullptr) add_masters_from(masters_env, inv.options, verb);
  if (inv.options.masters.empty()) throw UsageError(verb, "no masters: give -m URI or set REDLOCK_MASTERS");
  try {
    inv.options.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(verb, e.what());
  }
  milliseconds quarantine = inv.options.restart_quarantine;
  if (quarantine.count() > 0 && inv.ttl > quarantine && verb != Verb::release && verb != Verb::status) {
    throw UsageError(verb,
                     "--ttl must not exceed --quarantine (a restarted master would forget the lock "
                     "before it votes again)");
  }
}

}  // namespace

milliseconds parse_duration(std::string_view text, std::string_view what, Verb verb) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view unit = text.substr(digits);
  auto bad = [&](const std::string& why) { return UsageError(verb, std::string(what) + ": " + why); };
  if (digits == 0) {
    throw bad("'" + std::string(text) +
              "' is not a duration (write a whole number and a unit: 250ms, 10s, 2m)");
  }
  std::int64_t scale = 0;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = std::int64_t{60} * 1000;
  } else if (unit == "h") {
    scale = std::int64_t{60} * 60 * 1000;
  } else if (unit.empty()) {
    throw bad("'" + std::string(text) + "' has no unit (write " + std::string(text) + "s or " +
              std::string(text) + "ms)");
  } else {
    throw bad("'" + std::string(text) + "': unknown unit (use ms, s, m or h)");
  }
  std::int64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    value = value * 10 + (text[i] - '0');
    if (value * scale > max_ms) throw bad("'" + std::string(text) + "' is too long (at most 24 days)");
  }
  return milliseconds{value * scale};
}

Invocation parse(const std::vector<std::string>& args, const char* masters_env) {
  Invocation inv;
  if (args.empty()) throw UsageError(Verb::help, "no command given");
  const std::string& first = args[0];
  if (first == "--help" || first == "-h") return inv;
  if (first == "--version") {
    inv.verb = Verb::version;
    return inv;
  }
  std::optional<Verb> verb = verb_named(first);
  if (!verb) {
    bool flag = !first.empty() && first[0] == '-';
    throw UsageError(Verb::help, (flag ? "unknown option '" : "unknown command '") + first + "'");
  }
  inv.verb = *verb;
  if (inv.verb == Verb::help) {
    if (args.size() > 2) throw UsageError(Verb::help, "unexpected argument '" + args[2] + "'");
    if (args.size() == 2) {
      std::optional<Verb> topic = verb_named(args[1]);
      if (!topic) throw UsageError(Verb::help, "unknown command '" + args[1] + "'");
      inv.help_for = *topic;
    }
    return inv;
  }

  std::vector<std::string> positional;
  bool saw_dashes = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (inv.verb != Verb::run) throw UsageError(inv.verb, "unexpected '--'");
      saw_dashes = true;
      inv.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (std::size_t eq = name.find('='); name.substr(0, 2) == "--" && eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* flag = find_flag(name, inv.verb);
    if (flag == nullptr) {
      throw UsageError(
          inv.verb, "unknown option '" + std::string(name) + "' for 'redlock " + verb_name(inv.verb) + "'");
    }
    if (flag->id == Id::help) {
      inv.help_for = inv.verb;
      inv.verb = Verb::help;
      return inv;
    }
    std::string_view value;
    if (flag->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        throw UsageError(inv.verb, "option " + flag_name(*flag) + " needs a value");
      }
    } else if (inline_value) {
      throw UsageError(inv.verb, "option " + flag_name(*flag) + " takes no value");
    }
    apply(inv, *flag, value);
  }
  check_positionals(inv, positional, saw_dashes);
  check_options(inv, masters_env);
  return inv;
}

std::string usage_line(Verb verb) {
  switch (verb) {
    case Verb::run:
      return "usage: redlock run [options] RESOURCE -- CMD [ARGS...]";
    case Verb::acquire:
      return "usage: redlock acquire [options] RESOURCE";
    case Verb::extend:
      return "usage: redlock extend [options] RESOURCE VALUE";
    case Verb::release:
      return "usage: redlock release [options] RESOURCE VALUE";
    case Verb::status:
      return "usage: redlock status [options] [RESOURCE...]";
    case Verb::help:
    case Verb::version:
      break;
  }
  return "usage: redlock run|acquire|extend|release|status [options] ... (redlock --help)";
}

namespace {

constexpr const char* masters_help =
    "Masters:\n"
    "  -m, --master URI         a master: redis://[user:pass@]host[:port][/db],\n"
    "                           rediss://... (TLS) or unix:///path[?db=N]; repeat\n"
    "                           for each (N >= 1, odd recommended). Default:\n"
    "                           $REDLOCK_MASTERS, URIs separated by commas.\n"
    "  --connect-timeout D      connect and handshake per master (200ms)\n"
    "  --command-timeout D      one master's reply (50ms)\n"
    "  --key-prefix TEXT        key on each master = TEXT + RESOURCE\n"
    "  --quarantine D           a restarted master votes only after D (0: off);\n"
    "                           --ttl must not exceed it\n"
    "  --fencing                run, acquire: also take a fencing token, a number\n"
    "                           that grows with every grant (REDLOCK_FENCING_TOKEN)\n"
    "  --tls-ca FILE            rediss://: trust the CAs in FILE (PEM) rather than\n"
    "                           the system's store\n"
    "  --tls-cert FILE          rediss://: client certificate (PEM), with --tls-key\n"
    "  --tls-key FILE           rediss://: its private key (PEM)\n"
    "  --tls-server-name NAME   rediss://: the name the certificates must carry\n"
    "                           (default: each master's host)\n"
    "  --tls-insecure           rediss://: do not verify the masters' certificates\n"
    "  -h, --help               this help\n"
    "Durations are a whole number and a unit: 250ms, 10s, 2m, 1h.\n";

constexpr const char* exit_help =
    "Exit status:\n"
    "  0    success (run: CMD's own status instead, 128+N if a signal N ended it)\n"
    "  1    not acquired within the wait (-E N changes it); extend, release: not held\n"
    "  64   bad usage\n"
    "  69   too few masters reachable to form a quorum\n"
    "  70   an internal error\n"
    "  75   run: the lock was lost while CMD ran; CMD was stopped\n"
    "  126  run: CMD could not be executed\n"
    "  127  run: CMD not found\n";

}  // namespace

std::string help_text(Verb verb) {
  std::string text = usage_line(verb) + "\n\n";
  switch (verb) {
    case Verb::run:
      text +=
          "Takes the lock on RESOURCE across the masters, runs CMD while keeping the\n"
          "lock alive, releases it when CMD exits and exits with CMD's status: a\n"
          "distributed flock(1). CMD's environment gets REDLOCK_RESOURCE,\n"
          "REDLOCK_VALUE, REDLOCK_TTL_MS, REDLOCK_VALIDITY_MS (time left when CMD\n"
          "started) and, when fencing is on, REDLOCK_FENCING_TOKEN.\n\n"
          "CMD runs only while the lock is held:\n"
          "- CMD runs in a process group of its own (in the terminal's foreground\n"
          "  when redlock had it), and every signal goes to the whole group.\n"
          "- SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM (and the\n"
          "  other signals that would end redlock) are passed on to CMD's group.\n"
          "- If redlock dies, even of SIGKILL, CMD's group is killed at once.\n"
          "- If the lock is lost, CMD's group gets SIGTERM, then SIGKILL after\n"
          "  --kill-after or shortly before the lock's validity ends, whichever is\n"
          "  first: a CMD that traps SIGTERM has until then (at most the ttl), not\n"
          "  --kill-after. The lock stays taken until CMD is gone; redlock exits 75.\n"
          "- When CMD exits, what it left running in its group is killed.\n\n"
          "Options:\n"
          "  --ttl D                  lock time to live, renewed every D/3 (30s)\n"
          "  -n, --nonblock           one attempt; exit 1 if another holder has it\n"
          "  -w, --wait D             wait at most D (default: without end)\n"
          "  -E, --conflict-exit-code N  exit status when not acquired (1)\n"
          "  --kill-after D           SIGTERM to SIGKILL after a lost lock, at most (10s)\n";
      break;
    case Verb::acquire:
      text +=
          "Takes the lock and prints it as shell assignments for a later extend and\n"
          "release (no keep-alive: extend before REDLOCK_VALIDITY_MS runs out):\n"
          "  eval \"$(redlock acquire jobs --ttl 1m)\"\n"
          "  ...\n"
          "  redlock release jobs \"$REDLOCK_VALUE\"\n"
          "Prints REDLOCK_RESOURCE, REDLOCK_VALUE, REDLOCK_TTL_MS, REDLOCK_VALIDITY_MS\n"
          "and, when fencing is on, REDLOCK_FENCING_TOKEN.\n\n"
          "Options:\n"
          "  --ttl D                  lock time to live (30s)\n"
          "  -n, --nonblock           one attempt\n"
          "  -w, --wait D             wait at most D (default: without end)\n"
          "  -E, --conflict-exit-code N  exit status when not acquired (1)\n";
      break;
    case Verb::extend:
      text +=
          "Sets the lock's remaining time to --ttl on the masters where VALUE still\n"
          "holds it; fails (exit 1) when a quorum no longer does. Never re-creates an\n"
          "expired lock. Prints the lock as acquire does.\n\n"
          "Options:\n"
          "  --ttl D                  new time to live (30s)\n";
      break;
    case Verb::release:
      text +=
          "Deletes the lock where the masters hold VALUE. Exit 1 when a quorum no\n"
          "longer held it (it had expired or been taken).\n\n";
      break;
    case Verb::status:
      text +=
          "Per master: reachable or not, role, uptime, restart quarantine, eviction\n"
          "policy, round-trip time. Per RESOURCE: the value and time left on each\n"
          "master and whether a quorum holds it.\n\n"
          "Options:\n"
          "  --json                   one JSON object instead of text\n";
      break;
    case Verb::help:
    case Verb::version:
      return "usage: redlock COMMAND [options] ...\n\n"
             "Locks a named resource across N independent Redis masters (Redlock).\n\n"
             "Commands:\n"
             "  run RESOURCE -- CMD...   hold the lock while CMD runs (like flock)\n"
             "  acquire RESOURCE         take the lock and print it\n"
             "  extend RESOURCE VALUE    renew a lock taken by acquire\n"
             "  release RESOURCE VALUE   release it\n"
             "  status [RESOURCE...]     masters and who holds what\n"
             "  help COMMAND             a command's options (or COMMAND --help)\n\n"
             "  --version                the version\n\n" +
             std::string(masters_help) + "\n" + exit_help;
  }
  return text + "\n" + masters_help + "\n" + exit_help;
}

}  // namespace redlock::cli
