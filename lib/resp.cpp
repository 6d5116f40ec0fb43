#include "resp.hpp"

#include <hiredis/hiredis.h>

#include <cassert>
#include <charconv>
#include <cstring>
#include <new>
#include <utility>

namespace redlock {

std::string_view Reply::error_code() const {
  if (type != Type::error) return {};
  std::string_view s = str;
  return s.substr(0, s.find(' '));
}

// ---- encoding ---------------------------------------------------------------

// "*<argc>\r\n", then "$<length>\r\n<bytes>\r\n" per argument: what hiredis's
// redisFormatCommandArgv writes, without a sprintf per argument. The size is
// computed first, exactly, so the bytes are written once into their buffer.
namespace {

// Four digits per division: lengths and counts are mostly one or two digits.
std::size_t decimal_digits(std::size_t n) {
  for (std::size_t digits = 1;; digits += 4, n /= 10000) {
    if (n < 10) return digits;
    if (n < 100) return digits + 1;
    if (n < 1000) return digits + 2;
    if (n < 10000) return digits + 3;
  }
}

// "<kind><n>\r\n"
std::size_t header_size(std::size_t n) {
  return 1 + decimal_digits(n) + 2;
}

char* write_header(char* at, char kind, std::size_t n) {
  *at++ = kind;
  char* end = std::to_chars(at, at + decimal_digits(n), n).ptr;  // room made by header_size(n)
  end[0] = '\r';
  end[1] = '\n';
  return end + 2;
}

std::size_t argument_size(std::string_view arg) {
  return header_size(arg.size()) + arg.size() + 2;
}

char* write_argument(char* at, std::string_view arg) {
  at = write_header(at, '$', arg.size());
  if (!arg.empty()) std::memcpy(at, arg.data(), arg.size());
  at += arg.size();
  at[0] = '\r';
  at[1] = '\n';
  return at + 2;
}

std::size_t command_size(const std::string_view* argv, std::size_t argc) {
  std::size_t size = header_size(argc);
  for (std::size_t i = 0; i < argc; ++i) size += argument_size(argv[i]);
  return size;
}

// Writes exactly command_size(argv, argc) bytes at `at`.
void write_command(char* at, const std::string_view* argv, std::size_t argc) {
  at = write_header(at, '*', argc);
  for (std::size_t i = 0; i < argc; ++i) at = write_argument(at, argv[i]);
}

}  // namespace

static_assert(sizeof(Encoded) == 256 || sizeof(void*) != 8,
              "Encoded: keep the inline buffer at 256 bytes in all");

Encoded::Encoded(Encoded&& other) noexcept : size_(other.size_), heap_(std::move(other.heap_)) {
  if (!heap_) std::memcpy(inline_, other.inline_, size_);
  other.size_ = 0;
}

Encoded& Encoded::operator=(Encoded&& other) noexcept {
  if (this != &other) {
    size_ = other.size_;
    heap_ = std::move(other.heap_);
    if (!heap_) std::memcpy(inline_, other.inline_, size_);
    other.size_ = 0;
  }
  return *this;
}

Encoded encode_command(const std::string_view* argv, std::size_t argc) {
  Encoded out;
  out.size_ = command_size(argv, argc);
  char* at = out.inline_;
  if (out.size_ > Encoded::inline_capacity) {
    out.heap_.reset(new char[out.size_]);  // not make_unique: it would zero what is written next
    at = out.heap_.get();
  }
  write_command(at, argv, argc);
  return out;
}

void append_command(std::string& out, const std::string_view* argv, std::size_t argc) {
  std::size_t at = out.size();
  out.resize(at + command_size(argv, argc));
  write_command(&out[at], argv, argc);
}

void append_command(std::string& out, const std::vector<std::string_view>& argv) {
  append_command(out, argv.data(), argv.size());
}

std::string replace_first_arguments(std::string_view encoded, const std::vector<std::string_view>& first) {
  // Skip the count and one argument per replacement; the rest is kept as is.
  std::size_t at = encoded.find("\r\n") + 2;
  std::string_view count = encoded.substr(0, at);
  for (std::size_t i = 0; i < first.size(); ++i) {
    std::size_t header_end = encoded.find("\r\n", at);
    std::size_t length = 0;
    std::from_chars(encoded.data() + at + 1, encoded.data() + header_end, length);
    at = header_end + 2 + length + 2;
  }
  std::string_view rest = encoded.substr(at);

  std::size_t size = count.size() + rest.size();
  for (std::string_view replacement : first) size += argument_size(replacement);
  std::string out(size, '\0');
  char* to = out.data();
  std::memcpy(to, count.data(), count.size());
  to += count.size();
  for (std::string_view replacement : first) to = write_argument(to, replacement);
  if (!rest.empty()) std::memcpy(to, rest.data(), rest.size());
  return out;
}

// ---- parsing ----------------------------------------------------------------

// hiredis parses; these functions build our Reply values in place of its
// malloc'd redisReply trees. A top-level scalar reply (all a lock round gets)
// is built straight into the value next() returns: no allocation, no move.
// A top-level array is built in `root`, since hiredis may need several reads
// to complete it, and moved out once whole; its elements live in their
// parent's vector.
struct ReplyReader::Parser {
  redisReader* reader = nullptr;
  std::optional<Reply>* out = nullptr;  // what next() returns, during its call
  Reply root;
  bool too_large = false;

  static Parser& of(const redisReadTask* task) { return *static_cast<Parser*>(task->privdata); }

  // Where a string, integer or nil reply goes.
  static Reply* scalar_slot(const redisReadTask* task) {
    if (!task->parent) return &of(task).out->emplace();
    return element_slot(task);
  }

  static Reply* element_slot(const redisReadTask* task) {
    auto* parent = static_cast<Reply*>(task->parent->obj);
    return &parent->elements[static_cast<std::size_t>(task->idx)];
  }

  static void* create_string(const redisReadTask* task, char* str, std::size_t len) {
    Reply* r = scalar_slot(task);
    switch (task->type) {
      case REDIS_REPLY_ERROR:
        r->type = Reply::Type::error;
        break;
      case REDIS_REPLY_STATUS:
        r->type = Reply::Type::status;
        break;
      default:
        r->type = Reply::Type::string;
        break;
    }
    r->str.assign(str, len);
    return r;
  }

  static void* create_array(const redisReadTask* task, int elements) {
    if (elements > max_elements) {
      of(task).too_large = true;
      return nullptr;  // hiredis stops with an error
    }
    Reply* r = task->parent ? element_slot(task) : &of(task).root;
    r->type = Reply::Type::array;
    r->elements.assign(static_cast<std::size_t>(elements > 0 ? elements : 0), Reply{});
    return r;
  }

  static void* create_integer(const redisReadTask* task, long long value) {
    Reply* r = scalar_slot(task);
    r->type = Reply::Type::integer;
    r->integer = value;
    return r;
  }

  static void* create_nil(const redisReadTask* task) {
    Reply* r = scalar_slot(task);
    r->type = Reply::Type::nil;
    return r;
  }

  static void free_object(void*) {}  // the Parser and next()'s caller own every Reply

  static redisReplyObjectFunctions functions;

  Parser() : reader(redisReaderCreateWithFunctions(&functions)) {
    if (!reader) throw std::bad_alloc();
    reader->privdata = this;
  }
  ~Parser() { redisReaderFree(reader); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
};

redisReplyObjectFunctions ReplyReader::Parser::functions{create_string, create_array, create_integer,
                                                         create_nil, free_object};

ReplyReader::ReplyReader() : parser_(std::make_unique<Parser>()) {
}

ReplyReader::~ReplyReader() = default;

std::size_t ReplyReader::buffered() const {
  return parser_->reader->len - parser_->reader->pos;
}

bool ReplyReader::feed(const char* data, std::size_t size) {
  if (!error_.empty()) return false;
  if (redisReaderFeed(parser_->reader, data, size) != REDIS_OK) {
    error_ = parser_->reader->errstr;
    return false;
  }
  return true;
}

std::optional<Reply> ReplyReader::next() {
  std::optional<Reply> reply;  // the only object returned, so it is built in the caller's place
  redisReader* reader = parser_->reader;
  // With every byte fed so far consumed, hiredis cannot complete a reply; the
  // caller asks once more after each reply, so this saves a parse attempt per read.
  if (!error_.empty() || reader->pos == reader->len) return reply;
  parser_->out = &reply;
  void* raw = nullptr;
  int status = redisReaderGetReply(reader, &raw);
  parser_->out = nullptr;
  if (status != REDIS_OK) {
    if (parser_->too_large) {
      error_ = "an aggregate of more than " + std::to_string(max_elements) + " elements";
    } else {
      error_ = reader->errstr[0] ? reader->errstr : "protocol error";
    }
    reply.reset();
    return reply;
  }
  if (raw == &parser_->root) {
    reply.emplace(std::move(parser_->root));
    parser_->root = Reply{};
  }
  // Otherwise there is no whole reply yet, or it is the scalar built in `reply`.
  assert((raw != nullptr) == reply.has_value());
  return reply;
}

}  // namespace redlock
