#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "resp.hpp"

using namespace redlock;

namespace {

// The reference: what hiredis's formatter writes for the same argv.
std::string hiredis_format(const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* raw = nullptr;
  int size = redisFormatCommandArgv(&raw, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  REQUIRE(size >= 0);
  std::string out(raw, static_cast<std::size_t>(size));
  redisFreeCommand(raw);
  return out;
}

std::string encoded(const std::vector<std::string_view>& argv) {
  return std::string(encode_command(argv.data(), argv.size()).bytes());
}

// Every byte value, CR LF and NUL among them, `size` bytes long.
std::string binary(std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 7 + 13) % 256);
  return s;
}

}  // namespace

TEST_CASE("commands are encoded as RESP arrays of bulk strings", "[resp]") {
  std::string out;
  append_command(out, {"SET", "k", "v", "NX", "PX", "100"});
  CHECK(out == "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n100\r\n");
  SECTION("binary-safe: spaces, CR LF and NUL bytes pass untouched") {
    std::string out2;
    std::string odd("a b\r\n\0c", 7);
    append_command(out2, {"GET", odd});
    CHECK(out2 == std::string("*2\r\n$3\r\nGET\r\n$7\r\na b\r\n\0c\r\n", 26));
  }
  SECTION("appends to what is there: one buffer carries many commands") {
    append_command(out, {"PING"});
    CHECK(out.substr(out.size() - 14) == "*1\r\n$4\r\nPING\r\n");
  }
}

TEST_CASE("the reader returns each reply type as a value", "[resp]") {
  ReplyReader reader;
  std::string bytes =
      "+OK\r\n-NOSCRIPT No matching script\r\n:42\r\n$-1\r\n$5\r\nhello\r\n*2\r\n:1\r\n$1\r\nx\r\n";
  REQUIRE(reader.feed(bytes.data(), bytes.size()));

  auto ok = reader.next();
  REQUIRE(ok);
  CHECK(ok->is_status("OK"));

  auto error = reader.next();
  REQUIRE(error);
  CHECK(error->is_error());
  CHECK(error->error_code() == "NOSCRIPT");
  CHECK(error->str == "NOSCRIPT No matching script");

  auto integer = reader.next();
  REQUIRE(integer);
  CHECK(integer->type == Reply::Type::integer);
  CHECK(integer->integer == 42);

  auto nil = reader.next();
  REQUIRE(nil);
  CHECK(nil->type == Reply::Type::nil);

  auto bulk = reader.next();
  REQUIRE(bulk);
  CHECK(bulk->type == Reply::Type::string);
  CHECK(bulk->str == "hello");

  auto array = reader.next();
  REQUIRE(array);
  REQUIRE(array->type == Reply::Type::array);
  REQUIRE(array->elements.size() == 2);
  CHECK(array->elements[0].integer == 1);
  CHECK(array->elements[1].str == "x");

  CHECK_FALSE(reader.next());
  CHECK(reader.error().empty());
}

TEST_CASE("a reply split across reads comes out whole, once", "[resp]") {
  ReplyReader reader;
  std::string bytes = "$11\r\nhello world\r\n:7\r\n";
  std::vector<std::pair<std::size_t, Reply>> seen;  // (bytes fed so far, reply)
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    REQUIRE(reader.feed(&bytes[i], 1));
    while (auto reply = reader.next()) seen.emplace_back(i + 1, *reply);
  }
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == 18);
  CHECK(seen[0].second.str == "hello world");
  CHECK(seen[1].first == bytes.size());
  CHECK(seen[1].second.integer == 7);
}

TEST_CASE("arrays come out whole, nested or split across reads", "[resp]") {
  ReplyReader reader;
  CHECK_FALSE(reader.next());  // nothing fed yet
  std::string bytes = "*3\r\n*2\r\n:1\r\n$1\r\na\r\n*0\r\n*-1\r\n+OK\r\n:5\r\n*-1\r\n";
  std::vector<std::pair<std::size_t, Reply>> seen;  // (bytes fed so far, reply)
  auto feed = [&](std::size_t from, std::size_t count) {
    REQUIRE(reader.feed(&bytes[from], count));
    while (auto reply = reader.next()) seen.emplace_back(from + count, *reply);
  };
  SECTION("one byte at a time") {
    for (std::size_t i = 0; i < bytes.size(); ++i) feed(i, 1);
  }
  SECTION("all at once") {
    feed(0, bytes.size());
  }
  REQUIRE(seen.size() == 4);
  const Reply& nested = seen[0].second;
  REQUIRE(nested.type == Reply::Type::array);
  REQUIRE(nested.elements.size() == 3);
  REQUIRE(nested.elements[0].elements.size() == 2);
  CHECK(nested.elements[0].elements[0].integer == 1);
  CHECK(nested.elements[0].elements[1].str == "a");
  CHECK(nested.elements[1].type == Reply::Type::array);
  CHECK(nested.elements[1].elements.empty());
  CHECK(nested.elements[2].type == Reply::Type::nil);
  CHECK(seen[1].second.is_status("OK"));
  CHECK(seen[2].second.integer == 5);
  CHECK(seen[3].second.type == Reply::Type::nil);
  if (seen[0].first != bytes.size()) {  // byte by byte: each reply as soon as its last byte is in
    CHECK(seen[0].first == 28);
    CHECK(seen[1].first == 33);
    CHECK(seen[2].first == 37);
    CHECK(seen[3].first == bytes.size());
  }
  CHECK_FALSE(reader.next());
  CHECK(reader.error().empty());
}

TEST_CASE("a protocol violation is reported, not guessed around", "[resp]") {
  ReplyReader reader;
  std::string bytes = "?what\r\n";
  reader.feed(bytes.data(), bytes.size());
  CHECK_FALSE(reader.next());
  CHECK_FALSE(reader.error().empty());
  SECTION("and the reader stays failed") {
    std::string good = "+OK\r\n";
    CHECK_FALSE(reader.feed(good.data(), good.size()));
    CHECK_FALSE(reader.next());
  }
}

TEST_CASE("leading arguments of an encoded command can be replaced", "[resp]") {
  std::string evalsha;
  append_command(evalsha, {"EVALSHA", "0123456789abcdef0123456789abcdef01234567", "1", "key", "value"});
  std::string expected;
  append_command(expected, {"EVAL", "return 1", "1", "key", "value"});
  CHECK(replace_first_arguments(evalsha, {"EVAL", "return 1"}) == expected);
}

TEST_CASE("the encoder writes what hiredis's formatter writes, byte for byte", "[resp]") {
  std::string value(32, 'v');
  std::string crlf_nul("\r\n\0$*\r\n\0", 9);
  std::string long_arg = binary(std::size_t{64} * 1024 + 17);
  std::string very_long_arg(std::size_t{1} << 20, 'x');
  std::string at_inline_capacity(Encoded::inline_capacity, 'c');
  // The views below point into these strings, which outlive them.
  std::string bytes_256 = binary(256), bytes_1000 = binary(1000);
  std::string b9 = binary(9), b10 = binary(10), b99 = binary(99), b100 = binary(100), b999 = binary(999);
  std::vector<std::string> many_strings;
  for (int i = 0; i < 1234; ++i) many_strings.push_back(std::to_string(i));
  std::vector<std::string_view> many(many_strings.begin(), many_strings.end());

  std::vector<std::pair<const char*, std::vector<std::string_view>>> cases = {
      {"no arguments at all", {}},
      {"one word", {"PING"}},
      {"empty arguments", {"SET", "", ""}},
      {"only empty arguments", {"", "", "", ""}},
      {"a lock's SET", {"SET", "bench:latency", value, "NX", "PX", "10000"}},
      {"a lock's EVALSHA", {"EVALSHA", "3c878575892b1b569fd5e1a5ce04d480da65b703", "1", "k", value}},
      {"CR, LF, NUL, $ and * inside arguments", {"SET", crlf_nul, crlf_nul}},
      {"every byte value", {"SET", bytes_256, bytes_1000}},
      {"lengths around each new digit", {b9, b10, b99, b100, b999, bytes_1000}},
      {"an argument longer than 64 kB", {"SET", "k", long_arg}},
      {"an argument of 1 MB", {"SET", very_long_arg, "v"}},
      {"an argument as long as the inline buffer", {at_inline_capacity}},
      {"10 arguments: a two-digit count", {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}},
      {"1234 arguments", many},
  };
  for (const auto& [name, argv] : cases) {
    INFO(name);
    std::string expected = hiredis_format(argv);
    CHECK(encoded(argv) == expected);
    std::string appended;
    append_command(appended, argv);
    CHECK(appended == expected);
  }
}

TEST_CASE("an encoded command keeps its bytes when it is moved", "[resp]") {
  // Below, at and above the bytes an Encoded holds without a heap buffer.
  for (std::size_t total : {Encoded::inline_capacity - 1, Encoded::inline_capacity,
                            Encoded::inline_capacity + 1, std::size_t{100000}}) {
    // "*1\r\n" + "$<len>\r\n" + len bytes + "\r\n" == total
    std::size_t len = total - 4 - 5;
    while (4 + 1 + std::to_string(len).size() + 2 + len + 2 > total) --len;
    std::string arg = binary(len);
    std::string expected = hiredis_format({arg});
    REQUIRE(expected.size() == total);
    INFO("encoded size " << total);

    std::string_view argv[] = {arg};
    Encoded first = encode_command(argv, 1);
    CHECK(first.bytes() == expected);
    Encoded second(std::move(first));
    CHECK(second.bytes() == expected);
    Encoded third;
    CHECK(third.bytes().empty());
    third = std::move(second);
    CHECK(third.bytes() == expected);
  }
}

TEST_CASE("append_command appends, one buffer after another", "[resp]") {
  std::string out = binary(300);  // whatever was there stays
  std::string expected = out;
  std::vector<std::vector<std::string_view>> commands = {
      {"AUTH", "user", "secret"}, {"SELECT", "3"}, {"SCRIPT", "LOAD", "return 1"}, {"INFO"}, {}};
  for (const auto& argv : commands) {
    append_command(out, argv);
    expected += hiredis_format(argv);
    CHECK(out == expected);
  }
}

TEST_CASE("replacing leading arguments keeps the rest byte for byte", "[resp]") {
  std::string value = binary(40);
  std::string body(std::size_t{70} * 1024, 'b');
  std::string evalsha;
  append_command(evalsha, {"EVALSHA", "3c878575892b1b569fd5e1a5ce04d480da65b703", "1", "", value});
  CHECK(replace_first_arguments(evalsha, {"EVAL", body}) == hiredis_format({"EVAL", body, "1", "", value}));
  CHECK(replace_first_arguments(evalsha, {"X"}) ==
        hiredis_format({"X", "3c878575892b1b569fd5e1a5ce04d480da65b703", "1", "", value}));
  CHECK(replace_first_arguments(evalsha, {}) == evalsha);
}
