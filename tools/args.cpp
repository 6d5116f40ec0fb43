#include "args.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
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
    case Verb::leader:
      return "leader";
    case Verb::help:
      return "help";
    case Verb::version:
      return "version";
  }
  return "";
}

std::optional<Verb> verb_named(std::string_view name) {
  for (Verb v :
       {Verb::run, Verb::acquire, Verb::extend, Verb::release, Verb::status, Verb::leader, Verb::help}) {
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
  in_leader = 1U << 5U,
  in_all = in_run | in_acquire | in_extend | in_release | in_status | in_leader,
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
    case Verb::leader:
      return in_leader;
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
  watch,
  verbose,
  password_file,
  tls_ca,
  tls_cert,
  tls_key,
  tls_server_name,
  tls_insecure,
  owner,
  shared,
  permits,
  also,
  elect,
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
    {Id::json, "json", '\0', false, in_status | in_leader},
    {Id::watch, "watch", '\0', false, in_leader},
    {Id::verbose, "verbose", 'v', false, in_run | in_acquire},
    {Id::password_file, "password-file", '\0', true, in_all},
    {Id::tls_ca, "tls-ca", '\0', true, in_all},
    {Id::tls_cert, "tls-cert", '\0', true, in_all},
    {Id::tls_key, "tls-key", '\0', true, in_all},
    {Id::tls_server_name, "tls-server-name", '\0', true, in_all},
    {Id::tls_insecure, "tls-insecure", '\0', false, in_all},
    {Id::owner, "owner", '\0', true, in_run | in_acquire},
    {Id::shared, "shared", '\0', false, in_run | in_acquire | in_extend | in_release},
    {Id::permits, "permits", '\0', true, in_run},
    {Id::also, "also", '\0', true, in_run},
    {Id::elect, "elect", '\0', false, in_run},
};

// The flag `arg` names (--long or -s) among those `verbs` take.
const Flag* find_flag(std::string_view arg, unsigned verbs) {
  for (const Flag& f : flags) {
    if ((f.verbs & verbs) == 0) continue;
    if (arg.size() > 2 && arg.substr(0, 2) == "--" && arg.substr(2) == f.long_name) return &f;
    if (f.short_name != '\0' && arg.size() == 2 && arg[0] == '-' && arg[1] == f.short_name) return &f;
  }
  return nullptr;
}

// getopt's habits: "-nE 75", "-nE75", "-w5s" become "-n", "-E", "75"... A
// short flag that takes a value takes the rest of its word, or the next word.
std::vector<std::string> unbundled(const std::vector<std::string>& args, std::size_t from, Verb verb) {
  std::vector<std::string> out(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(from));
  for (std::size_t i = from; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg.size() <= 2 || arg[0] != '-' || arg[1] == '-') {
      out.push_back(arg);
      continue;
    }
    for (std::size_t j = 1; j < arg.size(); ++j) {
      std::string name = std::string("-") + arg[j];
      out.push_back(name);
      const Flag* flag = find_flag(name, bit(verb));
      if (flag != nullptr && flag->takes_value) {
        if (j + 1 < arg.size()) out.push_back(arg.substr(j + 1));
        break;
      }
    }
  }
  return out;
}

// Options given before the verb (`redlock -m URI status`) go after it: the
// verb comes first, and then says which of them it takes.
std::vector<std::string> verb_first(const std::vector<std::string>& args) {
  std::size_t i = 0;
  while (i < args.size() && args[i].size() > 1 && args[i][0] == '-' && args[i] != "--") {
    std::string_view name = args[i];
    bool inline_value = name.substr(0, 2) == "--" && name.find('=') != std::string_view::npos;
    if (inline_value) name = name.substr(0, name.find('='));
    const Flag* flag = find_flag(name, in_all);
    if (flag == nullptr || flag->id == Id::help) return args;
    i += flag->takes_value && !inline_value ? 2 : 1;
  }
  if (i == 0 || i >= args.size()) return args;
  std::vector<std::string> out = {args[i]};
  out.insert(out.end(), args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i));
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return out;
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

// Client::lock_permit's range, 1 to 10,000.
int parse_permits(std::string_view text, Verb verb) {
  int value = 0;
  bool ok = !text.empty() && text.size() <= 5;
  for (char c : text) {
    if (c < '0' || c > '9') ok = false;
    value = value * 10 + (c - '0');
  }
  if (!ok || value < 1 || value > 10000)
    throw UsageError(verb, "--permits wants a number from 1 to 10000, not '" + std::string(text) + "'");
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
    case Id::watch:
      inv.watch = true;
      break;
    case Id::verbose:
      inv.verbose = true;
      break;
    case Id::password_file:
      inv.password_file = std::string(value);
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
    case Id::owner:
      inv.options.owner = std::string(value);
      if (inv.options.owner.empty()) throw UsageError(verb, "--owner must not be empty");
      break;
    case Id::shared:
      inv.shared = true;
      break;
    case Id::permits:
      inv.permits = parse_permits(value, verb);
      break;
    case Id::elect:
      inv.elect = true;
      inv.options.fencing = true;  // the term is the lock's fencing token
      break;
    case Id::also:
      if (value.empty()) throw UsageError(verb, "--also must not be empty");
      inv.also.emplace_back(value);
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
    case Verb::leader:
      need(1, "NAME");
      inv.resource = positional[0];
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

// The first line of `path`, without its line end.
std::string read_password(const std::string& path, Verb verb) {
  std::FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr)
    throw UsageError(verb, "--password-file: cannot read '" + path + "': " + std::strerror(errno));
  std::string line;
  for (int c = std::fgetc(file); c != EOF && c != '\n'; c = std::fgetc(file)) line += static_cast<char>(c);
  std::fclose(file);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// A password kept out of argv (where ps shows it) for the masters whose URI has none.
void apply_password(Invocation& inv, const char* password_env) {
  std::string password;
  if (!inv.password_file.empty()) {
    password = read_password(inv.password_file, inv.verb);
  } else if (password_env != nullptr) {
    password = password_env;
  }
  if (password.empty()) return;
  for (Endpoint& e : inv.options.masters) {
    if (e.password.empty()) e.password = password;
  }
}

void check_options(Invocation& inv, const Environment& env) {
  Verb verb = inv.verb;
  if (inv.no_wait && inv.wait) throw UsageError(verb, "-n and -w cannot be used together");
  if (inv.shared && inv.permits > 0) throw UsageError(verb, "--shared and --permits cannot be used together");
  if (!inv.also.empty() && (inv.shared || inv.permits > 0))
    throw UsageError(verb, "--also goes with neither --shared nor --permits");
  if (inv.elect && (inv.shared || inv.permits > 0 || !inv.also.empty()))
    throw UsageError(verb, "--elect goes with none of --shared, --permits, --also");
  if (inv.no_wait) inv.wait = milliseconds{0};
  if (inv.options.masters.empty() && env.masters != nullptr) add_masters_from(env.masters, inv.options, verb);
  if (inv.options.masters.empty()) throw UsageError(verb, "no masters: give -m URI or set REDLOCK_MASTERS");
  apply_password(inv, env.password);
  try {
    inv.options.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(verb, in_cli_words(e.what()));
  }
  milliseconds quarantine = inv.options.restart_quarantine;
  if (quarantine.count() > 0 && inv.ttl > quarantine && verb != Verb::release && verb != Verb::status &&
      verb != Verb::leader) {
    throw UsageError(verb,
                     "--ttl must not exceed --quarantine (a restarted master would forget the lock "
                     "before it votes again)");
  }
}

}  // namespace

std::string in_cli_words(std::string text) {
  // Longest first: "TlsOptions::cert_file and key_file" before "cert_file".
  static const std::pair<std::string_view, std::string_view> words[] = {
      {"TlsOptions::cert_file and key_file", "--tls-cert and --tls-key"},
      {"tls.cert_file and tls.key_file", "--tls-cert and --tls-key"},
      {"redlock::Options: ", ""},
      {"TlsOptions::server_name", "--tls-server-name"},
      {"TlsOptions::ca_file", "--tls-ca"},
      {"tls.ca_file", "--tls-ca"},
      {"tls.ca_path", "--tls-ca"},
      {"tls.cert_file", "--tls-cert"},
      {"tls.key_file", "--tls-key"},
      {"owner must", "--owner must"},
      {"give it in the URI, redis://:password@host", "set REDLOCK_PASSWORD or give --password-file FILE"},
  };
  for (const auto& [library, cli] : words) {
    for (auto at = text.find(library); at != std::string::npos; at = text.find(library, at + cli.size()))
      text.replace(at, library.size(), cli);
  }
  return text;
}

milliseconds parse_duration(std::string_view text, std::string_view what, Verb verb) {
  auto bad = [&](const std::string& why) { return UsageError(verb, std::string(what) + ": " + why); };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view whole = text.substr(0, digits);
  std::string_view fraction;
  if (digits < text.size() && text[digits] == '.') {
    std::size_t end = digits + 1;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    fraction = text.substr(digits + 1, end - digits - 1);
    digits = end;
  }
  std::string_view unit = text.substr(digits);
  if (whole.empty() && fraction.empty()) {
    throw bad("'" + std::string(text) + "' is not a duration (write a number and a unit: 250ms, 1.5s, 2m; " +
              "a bare number is seconds)");
  }
  // A bare number is seconds, as flock's -w and timeout(1) take it.
  std::int64_t scale = 0;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s" || unit.empty()) {
    scale = 1000;
  } else if (unit == "m") {
    scale = std::int64_t{60} * 1000;
  } else if (unit == "h") {
    scale = std::int64_t{60} * 60 * 1000;
  } else {
    throw bad("'" + std::string(text) + "': unknown unit (use ms, s, m or h)");
  }
  auto too_long = [&] { return bad("'" + std::string(text) + "' is too long (at most 24 days)"); };
  std::int64_t ms = 0;
  for (char c : whole) {
    ms = ms * 10 + (c - '0');
    if (ms * scale > max_ms) throw too_long();
  }
  ms *= scale;
  // The fraction, to the nearest millisecond (digits past the ninth add nothing).
  std::int64_t numerator = 0;
  std::int64_t denominator = 1;
  for (char c : fraction.substr(0, 9)) {
    numerator = numerator * 10 + (c - '0');
    denominator *= 10;
  }
  ms += (numerator * scale + denominator / 2) / denominator;
  if (ms > max_ms) throw too_long();
  return milliseconds{ms};
}

Invocation parse(const std::vector<std::string>& given, const Environment& env) {
  Invocation inv;
  if (given.empty()) throw UsageError(Verb::help, "no command given");
  std::vector<std::string> args = verb_first(given);
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
    if (args.size() == 2 && args[1] != "--help" && args[1] != "-h") {
      std::optional<Verb> topic = verb_named(args[1]);
      if (!topic) throw UsageError(Verb::help, "unknown command '" + args[1] + "'");
      inv.help_for = *topic;
    }
    return inv;
  }

  args = unbundled(args, 1, inv.verb);
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
    const Flag* flag = find_flag(name, bit(inv.verb));
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
  check_options(inv, env);
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
    case Verb::leader:
      return "usage: redlock leader [options] NAME";
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
    "  --password-file FILE     the password of masters whose URI has none: the\n"
    "                           file's first line. Default: $REDLOCK_PASSWORD.\n"
    "                           (A password in a URI shows in ps.) CMD sees\n"
    "                           neither variable.\n"
    "  --connect-timeout D      connect and handshake per master (200ms)\n"
    "  --command-timeout D      one master's reply (50ms)\n"
    "  --key-prefix TEXT        key on each master = TEXT + {RESOURCE}\n"
    "  --quarantine D           a restarted master votes only after D (0: off);\n"
    "                           a longer ttl is refused\n"

    "  --tls-ca FILE            rediss://: trust the CAs in FILE (PEM) rather than\n"
    "                           the system's store\n"
    "  --tls-cert FILE          rediss://: client certificate (PEM), with --tls-key\n"
    "  --tls-key FILE           rediss://: its private key (PEM)\n"
    "  --tls-server-name NAME   rediss://: the name the certificates must carry\n"
    "                           (default: each master's host)\n"
    "  --tls-insecure           rediss://: do not verify the masters' certificates\n"
    "  -h, --help               this help\n"
    "Durations are a number and a unit: 250ms, 1.5s, 2m, 1h; a bare number is\n"
    "seconds (-w 10, as with flock). Short options bundle as with getopt (-nE 75,\n"
    "-w5s), and the options every command takes may come before it\n"
    "(redlock -m URI status).\n";

constexpr const char* exit_help =
    "Exit status:\n"
    "  0    success (run: CMD's own status instead, 128+N if a signal N ended it)\n"
    "  1    not acquired within the wait (-E N changes it); extend, release: not held\n"
    "  2    status: a quorum of masters votes, but not all (degraded)\n"
    "  64   bad usage\n"
    "  69   too few masters reachable to form a quorum (status: too few vote)\n"
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
          "  -v, --verbose            say on stderr when the lock was not acquired\n"
          "  --kill-after D           SIGTERM to SIGKILL after a lost lock, at most (10s)\n"
          "  --fencing                also take a fencing token, a number that grows\n"
          "                           with every grant (REDLOCK_FENCING_TOKEN)\n"
          "  --owner TEXT             who holds it, as status shows (hostname:pid)\n"
          "  --shared                 a shared (read) lock: held beside other shared\n"
          "                           holders, never beside an exclusive one\n"
          "  --permits N              one of N permits of RESOURCE: at most N holders\n"
          "                           at once (REDLOCK_PERMIT says which)\n"
          "  --also NAME              take NAME too, with RESOURCE, all or none (repeat\n"
          "                           it for more); never deadlocks, whatever the order\n"
          "  --elect                  lead the election RESOURCE while CMD runs (its\n"
          "                           id: --owner; `redlock leader RESOURCE` shows it);\n"
          "                           the term is REDLOCK_FENCING_TOKEN\n";
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
          "  -E, --conflict-exit-code N  exit status when not acquired (1)\n"
          "  -v, --verbose            say on stderr when the lock was not acquired\n"
          "  --fencing                also take a fencing token (REDLOCK_FENCING_TOKEN)\n"
          "  --owner TEXT             who holds it, as status shows (hostname:pid)\n"
          "  --shared                 a shared (read) lock; extend and release it with\n"
          "                           --shared too\n";
      break;
    case Verb::extend:
      text +=
          "Sets the lock's remaining time to --ttl on the masters where VALUE still\n"
          "holds it; fails (exit 1) when a quorum no longer does. Never re-creates an\n"
          "expired lock. Prints the lock as acquire does.\n\n"
          "Options:\n"
          "  --ttl D                  new time to live (30s)\n"
          "  --shared                 the lock was acquired with --shared\n";
      break;
    case Verb::release:
      text +=
          "Deletes the lock where the masters hold VALUE. Exit 1 when a quorum no\n"
          "longer held it (it had expired or been taken).\n\n"
          "Options:\n"
          "  --shared                 the lock was acquired with --shared\n";
      break;
    case Verb::leader:
      text +=
          "Who leads the election NAME (redlock::Election, run --elect), from one\n"
          "read of every master: its id, its value and its term. Exit 0 when someone\n"
          "leads, 1 when nobody does, 69 when too few masters answer to say.\n"
          "With --watch, one line per change (a new leader, a new value, no leader)\n"
          "until interrupted.\n\n"
          "Options:\n"
          "  --watch                  follow every change\n"
          "  --json                   one JSON object per line instead of text\n";
      break;
    case Verb::status:
      text +=
          "Per master: reachable or not, role, uptime, restart quarantine, eviction\n"
          "policy, round-trip time. Per RESOURCE: whether a quorum holds it, who\n"
          "holds it (--owner, by default hostname:pid), in which mode, for how long\n"
          "and how much longer, the last fencing token handed out, how many wait,\n"
          "and the value and time left on each master.\n\n"
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
             "  leader NAME              who leads the election NAME (--watch: follow it)\n"
             "  help COMMAND             a command's options (or COMMAND --help)\n\n"
             "  --version                the version\n\n" +
             std::string(masters_help) + "\n" + exit_help;
  }
  return text + "\n" + masters_help + "\n" + exit_help;
}

}  // namespace redlock::cli
