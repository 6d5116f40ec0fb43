#pragma once

#include <uv.h>

#include <redlock/options.hpp>
#include <redlock/stats.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backoff.hpp"
#include "resolver.hpp"
#include "resp.hpp"
#include "scripts.hpp"
#include "tls.hpp"
#include "uv_handle.hpp"

namespace redlock {

class Master;

/// One command for one or many masters, encoded once and shared by the N
/// pending entries of a round (a NOSCRIPT answer re-runs it with EVAL).
class Command {
 public:
  /// The replies a command can get besides an error reply; anything else is a
  /// protocol error (the master is broken or hostile).
  enum class Expect { any, set_nx, script, flags };

  /// `argv` is the whole command.
  static std::shared_ptr<const Command> plain(std::initializer_list<std::string_view> argv);
  /// SET key value NX PX ttl: answered OK or nil.
  static std::shared_ptr<const Command> set_nx(std::initializer_list<std::string_view> argv);
  /// Runs `script` with EVALSHA; `argv` is KEYS[1] and then ARGV.
  static std::shared_ptr<const Command> script(const Script& script,
                                               std::initializer_list<std::string_view> argv);
  /// The same for arguments only known at run time (tests, tools).
  static std::shared_ptr<const Command> plain(const std::vector<std::string>& argv);
  static std::shared_ptr<const Command> script(const Script& script, const std::vector<std::string>& argv);
  /// Runs `script` (one of the multi-lock scripts, whose key count varies)
  /// with EVALSHA on `keys` keys: `argv` is KEYS and then ARGV, any length.
  static std::shared_ptr<const Command> script_over(const Script& script, std::size_t keys,
                                                    const std::vector<std::string>& argv);
  /// Runs `script`, a read (scripts::read_holder), which may answer anything.
  static std::shared_ptr<const Command> read(const Script& script, const std::vector<std::string>& argv);
  /// Runs `script` with EVALSHA on `keys` keys: `argv` is KEYS and then ARGV,
  /// any length. Answered by a string of one '0' or '1' per lock, `locks` of
  /// them (scripts::renew, renew_shared).
  static std::shared_ptr<const Command> flags(const Script& script, std::size_t keys,
                                              const std::vector<std::string_view>& argv, std::size_t locks);

  std::string_view encoded() const { return encoded_.bytes(); }
  const Script* script() const { return script_; }
  /// Expect::flags: the locks it covers (one vote each); 0 otherwise.
  std::size_t batch() const { return expect_ == Expect::flags ? locks_ : 0; }
  /// Whether `reply` (not an error) is one this command can get.
  bool expects(const Reply& reply) const;
  /// The EVAL form, for a master that lost its scripts.
  std::string encoded_as_eval() const;

 private:
  template <class Args>
  static std::shared_ptr<const Command> make(const Script* script, const Args& argv);
  template <class Args>
  static std::shared_ptr<Command> over(const Script& script, std::size_t keys, const Args& argv,
                                       Expect expect);

  const Script* script_ = nullptr;
  Expect expect_ = Expect::any;
  std::size_t locks_ = 0;  // Expect::flags: the answer's length
  Encoded encoded_;
};

/// Why a command got no reply.
enum class Failure {
  timeout,       // command_timeout passed; the connection was dropped
  disconnected,  // the connection failed or was lost before the reply
  unusable,      // answered NOSCRIPT and could not run again in order
};

/// Receives the answer to a command. Held weakly: when the receiver is gone
/// by the time the answer arrives, the answer is dropped.
class ReplyHandler {
 public:
  virtual void on_reply(const Master& from, const Reply& reply) = 0;
  virtual void on_failure(const Master& from, Failure why) = 0;

 protected:
  ~ReplyHandler() = default;
};

struct MasterConfig {
  Endpoint endpoint;
  std::size_t index = 0;  // position in Options::masters
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds command_timeout{50};
  std::chrono::milliseconds restart_quarantine{0};
  std::chrono::milliseconds reconnect_base{20};
  std::chrono::milliseconds reconnect_cap{1000};
  std::function<void(std::string_view)> diagnostics;  // see Options::diagnostics
  std::shared_ptr<const TlsContext> tls;              // set for a rediss:// endpoint
  // A subscriber connection: AUTH only, then SUBSCRIBE / UNSUBSCRIBE sent by
  // the owner, whose confirmations are matched like replies; messages go to
  // on_message (the channel). on_ready runs after every handshake, so the
  // owner can subscribe again after a reconnect.
  bool subscriber = false;
  // A channel to PUBLISH to once per connection (empty: none), to say at
  // connect when the ACL user may not publish our channels.
  std::string publish_probe;
  std::function<void(std::string_view channel, std::string_view payload)> on_message;
  std::function<void(Master&)> on_ready;
  /// Ready again, but another server run than before (its run_id changed:
  /// it restarted, maybe empty): what it held may be gone.
  std::function<void(Master&)> on_restarted;
  // Runs after the connection was dropped or could not be made (trouble()
  // says why), once what was written has been failed.
  std::function<void(const Master&)> on_dropped;
};

/// The config of a subscriber connection to options.masters[index], with
/// `tls` for a rediss:// master; the owner adds its callbacks.
MasterConfig subscriber_config(const Options& options, std::size_t index,
                               const std::shared_ptr<const TlsContext>& tls);

/// What was seen of one master's votes and replies (Client::stats()).
struct MasterCounters {
  std::uint64_t granted = 0;
  std::uint64_t refused = 0;
  std::uint64_t failed = 0;
  std::uint64_t timeouts = 0;
  std::chrono::microseconds rtt{0};  // smoothed, 0 before the first reply

  /// Folds in one round trip: rtt += (sample - rtt) / 8, as TCP's SRTT.
  void round_trip(std::chrono::microseconds sample) {
    rtt = rtt.count() == 0 ? sample : rtt + (sample - rtt) / 8;
  }
};

/// One connection to one master: connect (name resolution, TCP or Unix
/// socket, then a TLS handshake for rediss://), a pipelined handshake (AUTH, SELECT, SCRIPT LOAD, INFO
/// server), a FIFO of commands awaiting replies, one deadline timer, and reconnect with backoff. Commands
/// issued in one loop iteration leave in one write.
///
/// Every command gets exactly one answer through its handler: a reply, or a
/// Failure. Destroying the Master drops pending answers silently.
class Master {
 public:
  enum class State { backing_off, resolving, connecting, handshaking, ready };

  Master(uv_loop_t* loop, MasterConfig config, std::uint64_t seed);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  /// Queues `command`. Never answers inside this call. An empty handler means
  /// nobody waits for the answer.
  ///
  /// Deadlines: a command waiting for a connection fails command_timeout after
  /// this call (a slow connect is a slow vote); once its bytes are handed to a
  /// connected socket it has command_timeout from then for its reply, so a
  /// loop kept busy by the caller costs no vote. `patience` > 0 keeps the
  /// bytes queued that long for a connection even after the vote failed:
  /// releases, which must reach a master that comes back.
  void send(std::shared_ptr<const Command> command, std::weak_ptr<ReplyHandler> handler,
            std::chrono::milliseconds patience = {});
  /// Writes what is buffered now rather than before the next poll.
  void flush();

  std::size_t index() const { return config_.index; }
  const Endpoint& endpoint() const { return config_.endpoint; }
  State state() const { return state_; }
  /// Connected, handshake done, a master (not a replica), and out of restart
  /// quarantine.
  bool voting() const;
  /// The server's run_id from INFO at the last connect; empty before.
  const std::string& run_id() const { return run_id_; }
  /// Successful handshakes so far.
  std::uint64_t connections() const { return connections_; }
  /// What went wrong last and has not recovered since, in the words of its
  /// diagnostics line (without the endpoint), or why it does not vote; empty
  /// when it votes and its last answer was good.
  std::string trouble() const;
  /// Its state, role and counters for Client::stats().
  MasterStats stats() const;

  struct Socket;
  struct SocketCloser {
    void operator()(Socket* s) const noexcept;
  };

 private:
  // Where a command is: waiting for a connection, in out_ (the next write),
  // or written to the live connection. While connected, pending_ holds the
  // written commands and then the buffered ones; otherwise only queued ones.
  enum class Stage { queued, buffered, written };
  struct Pending {
    std::shared_ptr<const Command> command;
    std::weak_ptr<ReplyHandler> handler;
    std::uint64_t vote_deadline;     // queued: when its vote fails (uv_now() ms)
    std::uint64_t give_up;           // queued: when its bytes are dropped unsent
    std::uint64_t reply_deadline{};  // written: when its reply is late
    std::uint64_t written_ns = 0;    // written: uv_hrtime() then, for the round-trip time
    Stage stage = Stage::queued;
    bool answered = false;  // its handler has been told; a reply may still be due
    bool rerun = false;     // already re-sent with EVAL after NOSCRIPT
    bool vote = false;      // sent with a handler: its answer is a vote
  };
  enum class Step { auth, select, load_script, info, publish_probe };

  bool connected() const { return state_ == State::handshaking || state_ == State::ready; }
  bool awaiting_reply() const;

  void connect();
  void resolve();
  void on_resolved(int status, Addresses addresses);
  template <class Init>
  bool open_socket(Init init);
  void connect_to(const sockaddr* address);
  void connect_to_cached();
  bool skip_failed_address();
  bool try_next_address();
  void fail_expired_in_handshake(std::uint64_t now);
  void connect_unix();
  void on_connected(int status);
  void continue_tls_handshake();
  void start_handshake();
  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_tls_bytes(const char* data, std::size_t size);
  void on_plaintext(const char* data, std::size_t size);
  std::string closed(std::string why) const;
  void read_now();
  void on_handshake_reply(const Reply& reply);
  void handshake_done();
  void on_command_reply(const Reply& reply);
  bool on_noscript(Pending& p);
  /// Reads run_id, uptime, role and the rest; says what makes the master
  /// unfit to vote (too old a Redis), or nothing.
  std::string parse_info(const std::string& info);
  void warn(const std::string& message) const;
  void report(const std::string& cause, bool network);
  void recovered();
  void refused(const std::string& why);
  void protocol_error(const std::string& why);
  void lost(const std::string& why, Failure failure = Failure::disconnected);
  std::string connect_timed_out() const;
  void drop(Failure why);
  void schedule_reconnect();
  void arm_timer();
  void on_timer();
  void expire_queued(std::uint64_t now);
  bool write_out();
  bool write_wire(std::string& bytes);
  std::string send_bytes(std::string& bytes);
  long send_now(const char* data, std::size_t size);
  void deliver(Pending& p, const Reply* reply, Failure why);
  void count_vote(const Pending& p, const Reply* reply);

  friend struct Callbacks;

  uv_loop_t* loop_;
  MasterConfig config_;
  State state_ = State::backing_off;
  Backoff backoff_;

  // socket_ is the live connection; the closer detaches it and lets libuv
  // free it, so a callback of an old connection never reaches this Master.
  std::unique_ptr<Socket, SocketCloser> socket_;
  // A name is looked up once and its addresses kept across connections: a
  // reconnect tries them first and asks DNS again only once each has failed.
  // lookup_ is the lookup in flight, never more than one; destroying it
  // abandons it, so neither a reconnect nor this Master waits for DNS.
  std::unique_ptr<Lookup> lookup_;
  Addresses addresses_;               // from the last lookup that found any
  std::size_t trying_ = 0;            // the index in addresses_ connected to, or tried last
  std::size_t failed_addresses_ = 0;  // cached addresses that failed in a row
  bool attempting_ = false;           // connecting to addresses_[trying_], not connected yet
  std::unique_ptr<ReplyReader> reader_;
  // rediss://: the TLS layer of the live connection. While its handshake
  // runs the Master is still State::connecting, so commands wait unwritten.
  std::unique_ptr<TlsSession> tls_;
  bool heard_ = false;            // the live connection got a byte from the server
  std::uint64_t generation_ = 0;  // bumped per connection, to notice a drop mid-read

  struct HandshakeStep {
    Step step;
    const Script* script = nullptr;  // load_script: the one being loaded
  };
  std::deque<HandshakeStep> handshake_;
  std::deque<Pending> pending_;
  std::string out_;  // bytes for the live connection, written before the next poll
  std::vector<char> read_buffer_;

  std::uint64_t connect_deadline_ = 0;
  std::uint64_t timer_due_ = 0;  // when deadline_timer_ fires; 0 when stopped
  Timer deadline_timer_;
  Timer reconnect_timer_;
  Handle<uv_prepare_t> flusher_;

  std::string run_id_;
  bool restarted_ = false;  // the last INFO gave another run_id than the one before
  std::string role_;        // INFO role at the last connect
  bool is_master_ = false;  // role_ is master
  std::chrono::milliseconds uptime_at_connect_{0};
  std::chrono::steady_clock::time_point connected_at_{};
  std::uint64_t connections_ = 0;
  // What went wrong last, said once per change (report()) and cleared when
  // the master recovers: a connection or handshake failure at the next
  // handshake done, a failure after it at the next good reply.
  std::string cause_;
  bool cause_before_ready_ = false;
  bool cause_said_ = false;
  MasterCounters counters_;
};

}  // namespace redlock
