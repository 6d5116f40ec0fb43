#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "resp.hpp"

using namespace redlock;

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
