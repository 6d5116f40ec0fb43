#include "resp.hpp"

#include <hiredis/hiredis.h>

#include <stdexcept>

namespace redlock {
namespace {

Reply convert(const redisReply& r) {
  Reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      out.elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
      break;
    case REDIS_REPLY_NIL:
    default:
      out.type = Reply::Type::nil;
      break;
  }
  return out;
}

struct ReplyDeleter {
  void operator()(void* r) const { freeReplyObject(r); }
};

}  // namespace

std::string_view Reply::error_code() const {
  if (type != Type::error) return {};
  std::string_view s = str;
  return s.substr(0, s.find(' '));
}

void append_command(std::string& out, const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* encoded = nullptr;
  int size = redisFormatCommandArgv(&encoded, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (size < 0) throw std::bad_alloc();
  out.append(encoded, static_cast<std::size_t>(size));
  redisFreeCommand(encoded);
}

struct ReplyReader::Parser {
  redisReader* reader = redisReaderCreate();
  ~Parser() { redisReaderFree(reader); }
};

ReplyReader::ReplyReader() : parser_(std::make_unique<Parser>()) {
  if (!parser_->reader) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() = default;

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
    error_ = parser_->reader->errstr[0] ? parser_->reader->errstr : "protocol error";
    return std::nullopt;
  }
  if (!raw) return std::nullopt;
  std::unique_ptr<void, ReplyDeleter> owned(raw);
  return convert(*static_cast<const redisReply*>(raw));
}

}  // namespace redlock
