#pragma once

// The wire format, and the only place that knows hiredis: argv in, bytes out;
// bytes in, Reply values out.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

/// One RESP reply as a small C++ value.
struct Reply {
  enum class Type { string, array, integer, nil, status, error };

  Type type = Type::nil;
  long long integer = 0;
  std::string str;  // string, status and error replies
  std::vector<Reply> elements;

  bool is_error() const { return type == Type::error; }
  bool is_status(std::string_view s) const { return type == Type::status && str == s; }
  /// For error replies: the leading word ("NOSCRIPT", "LOADING", "ERR", ...).
  std::string_view error_code() const;
};

/// The RESP encoding of one command in the buffer hiredis formatted it into
/// (owned here, so it is not copied).
class Encoded {
 public:
  Encoded() = default;
  std::string_view bytes() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(char* p) const noexcept;
  };
  friend Encoded encode_command(const std::string_view* argv, std::size_t argc);
  std::unique_ptr<char, Free> data_;
  std::size_t size_ = 0;
};

Encoded encode_command(const std::string_view* argv, std::size_t argc);

/// Appends the RESP encoding of `argv` (a command and its arguments) to `out`.
void append_command(std::string& out, const std::vector<std::string_view>& argv);
void append_command(std::string& out, const std::string_view* argv, std::size_t argc);

/// `encoded` (one command, as append_command writes it) with its first
/// arguments replaced by `first`, the same number of them: how EVALSHA sha
/// becomes EVAL body without keeping the other arguments around.
std::string replace_first_arguments(std::string_view encoded, const std::vector<std::string_view>& first);

/// Incremental reply parser: feed() bytes as they arrive, then call next()
/// until it returns nothing. After a protocol error the stream is unusable.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  /// False when the reader is in error (see error()).
  bool feed(const char* data, std::size_t size);
  /// The next complete reply, if any. Returns nothing, and sets error(), on a
  /// protocol error.
  std::optional<Reply> next();
  /// Empty unless the stream violated the protocol.
  const std::string& error() const { return error_; }
  /// Bytes fed but not yet parsed into a reply.
  std::size_t buffered() const;

  /// The most elements an aggregate may announce: no command we send gets a
  /// large one, and the count must not size memory a master chose.
  static constexpr long long max_elements = 1024;

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
  std::string error_;
};

}  // namespace redlock
