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

/// The RESP encoding of one command. A lock command (with a key of up to about
/// 100 bytes) fits inside the object, so the Command holding it costs one
/// allocation; a longer one gets a heap buffer of its exact size.
/// bytes() points into the object: moving an Encoded invalidates it.
class Encoded {
 public:
  /// Bytes held without a heap buffer; sizeof(Encoded) is 256.
  static constexpr std::size_t inline_capacity = 240;

  Encoded() = default;
  Encoded(Encoded&& other) noexcept;
  Encoded& operator=(Encoded&& other) noexcept;
  Encoded(const Encoded&) = delete;
  Encoded& operator=(const Encoded&) = delete;
  ~Encoded() = default;

  std::string_view bytes() const { return {heap_ ? heap_.get() : inline_, size_}; }

 private:
  friend Encoded encode_command(const std::string_view* argv, std::size_t argc);
  std::size_t size_ = 0;
  std::unique_ptr<char[]> heap_;  // only when size_ > inline_capacity
  char inline_[inline_capacity];
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
