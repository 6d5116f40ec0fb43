#include "resp.hpp"

#include <hiredis/hiredis.h>

#include <stdexcept>

namespace redlock {

std::string_view Reply::error_code() const {
  if (type != Type::error) return {};
  std::string_view s = str;
  return s.substr(0, s.find(' '));
}

// ---- encoding ---------------------------------------------------------------

void Encoded::Free::operator()(char* p) const noexcept {
  redisFreeCommand(p);
}

Encoded encode_command(const std::string_view* argv, std::size_t argc) {
  // Lock commands have at most 9 arguments: no allocation for the arrays then.
  constexpr std::size_t inline_args = 12;
  const char* ptrs_inline[inline_args];
  std::size_t lens_inline[inline_args];
  std::vector<const char*> ptrs_heap;
  std::vector<std::size_t> lens_heap;
  const char** ptrs = ptrs_inline;
  std::size_t* lens = lens_inline;
  if (argc > inline_args) {
    ptrs_heap.resize(argc);
    lens_heap.resize(argc);
    ptrs = ptrs_heap.data();
    lens = lens_heap.data();
  }
  for (std::size_t i = 0; i < argc; ++i) {
    ptrs[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  char* encoded = nullptr;
  int size = redisFormatCommandArgv(&encoded, static_cast<int>(argc), ptrs, lens);
  if (size < 0) throw std::bad_alloc();
  Encoded out;
  out.data_.reset(encoded);
  out.size_ = static_cast<std::size_t>(size);
  return out;
}

void append_command(std::string& out, const std::string_view* argv, std::size_t argc) {
  out += encode_command(argv, argc).bytes();
}

void append_command(std::string& out, const std::vector<std::string_view>& argv) {
  append_command(out, argv.data(), argv.size());
}

std::string replace_first_arguments(std::string_view encoded, const std::vector<std::string_view>& first) {
  // "*<argc>\r\n" then "$<len>\r\n<bytes>\r\n" per argument.
  std::size_t at = encoded.find("\r\n") + 2;
  std::string out(encoded.substr(0, at));
  for (std::string_view replacement : first) {
    std::size_t header_end = encoded.find("\r\n", at);
    std::size_t length = std::stoul(std::string(encoded.substr(at + 1, header_end - at - 1)));
    at = header_end + 2 + length + 2;
    out += "$" + std::to_string(replacement.size()) + "\r\n";
    out += replacement;
    out += "\r\n";
  }
  out += encoded.substr(at);
  return out;
}

// ---- parsing ----------------------------------------------------------------

// hiredis parses; these functions build our Reply values in place of its
// malloc'd redisReply trees. A top-level scalar reply (all a lock round gets)
// costs no allocation; array elements live in their parent's vector.
struct ReplyReader::Parser {
  redisReader* reader = nullptr;
  Reply root;
  bool too_large = false;

  static Reply* slot(const redisReadTask* task) {
    if (!task->parent) return &static_cast<Parser*>(task->privdata)->root;
    auto* parent = static_cast<Reply*>(task->parent->obj);
    return &parent->elements[static_cast<std::size_t>(task->idx)];
  }

  static void* create_string(const redisReadTask* task, char* str, std::size_t len) {
    Reply* r = slot(task);
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
      static_cast<Parser*>(task->privdata)->too_large = true;
      return nullptr;  // hiredis stops with an error
    }
    Reply* r = slot(task);
    r->type = Reply::Type::array;
    r->elements.assign(static_cast<std::size_t>(elements > 0 ? elements : 0), Reply{});
    return r;
  }

  static void* create_integer(const redisReadTask* task, long long value) {
    Reply* r = slot(task);
    r->type = Reply::Type::integer;
    r->integer = value;
    return r;
  }

  static void* create_nil(const redisReadTask* task) {
    Reply* r = slot(task);
    r->type = Reply::Type::nil;
    return r;
  }

  static void free_object(void*) {}  // the Parser owns every Reply

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
  if (!error_.empty()) return std::nullopt;
  void* raw = nullptr;
  if (redisReaderGetReply(parser_->reader, &raw) != REDIS_OK) {
    if (parser_->too_large) {
      error_ = "an aggregate of more than " + std::to_string(max_elements) + " elements";
    } else {
      error_ = parser_->reader->errstr[0] ? parser_->reader->errstr : "protocol error";
    }
    return std::nullopt;
  }
  if (!raw) return std::nullopt;
  Reply reply = std::move(parser_->root);
  parser_->root = Reply{};
  return reply;
}

}  // namespace redlock
