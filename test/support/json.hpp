#pragma once

// A small JSON reader for tests that check a program's JSON output: objects,
// arrays, strings (with \" \\ \/ \b \f \n \r \t \uXXXX below 0x80), numbers,
// true, false, null. Throws std::runtime_error on anything else, so output
// that is not JSON fails the test.

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::test {

struct Json {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool is_null() const { return type == Type::null; }
  /// The member `key` of an object; throws when absent or not an object.
  const Json& operator[](const std::string& key) const {
    if (type != Type::object) throw std::runtime_error("json: not an object, looking for " + key);
    auto it = object.find(key);
    if (it == object.end()) throw std::runtime_error("json: no member " + key);
    return it->second;
  }
  const Json& operator[](std::size_t i) const {
    if (type != Type::array || i >= array.size())
      throw std::runtime_error("json: no element " + std::to_string(i));
    return array[i];
  }

  static Json parse(std::string_view text) {
    std::size_t at = 0;
    Json value = read(text, at);
    skip_space(text, at);
    if (at != text.size()) throw std::runtime_error("json: trailing text at " + std::to_string(at));
    return value;
  }

 private:
  [[noreturn]] static void fail(std::size_t at, const char* what) {
    throw std::runtime_error(std::string("json: ") + what + " at " + std::to_string(at));
  }

  static void skip_space(std::string_view t, std::size_t& at) {
    while (at < t.size() && (t[at] == ' ' || t[at] == '\n' || t[at] == '\r' || t[at] == '\t')) ++at;
  }

  static void expect(std::string_view t, std::size_t& at, std::string_view word) {
    if (t.substr(at, word.size()) != word) fail(at, "unexpected token");
    at += word.size();
  }

  static std::string read_string(std::string_view t, std::size_t& at) {
    expect(t, at, "\"");
    std::string out;
    while (true) {
      if (at >= t.size()) fail(at, "unterminated string");
      char c = t[at++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail(at, "control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= t.size()) fail(at, "unterminated escape");
      char e = t[at++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (at + 4 > t.size()) fail(at, "short \\u escape");
          unsigned long code = std::stoul(std::string(t.substr(at, 4)), nullptr, 16);
          if (code >= 0x80) fail(at, "\\u escape above 0x7f (not needed by our tests)");
          out += static_cast<char>(code);
          at += 4;
          break;
        }
        default:
          fail(at, "bad escape");
      }
    }
  }

  static Json read(std::string_view t, std::size_t& at) {
    skip_space(t, at);
    if (at >= t.size()) fail(at, "unexpected end");
    Json v;
    char c = t[at];
    if (c == '{') {
      v.type = Type::object;
      ++at;
      skip_space(t, at);
      if (at < t.size() && t[at] == '}') {
        ++at;
        return v;
      }
      while (true) {
        skip_space(t, at);
        std::string key = read_string(t, at);
        skip_space(t, at);
        expect(t, at, ":");
        v.object[key] = read(t, at);
        skip_space(t, at);
        if (at < t.size() && t[at] == ',') {
          ++at;
          continue;
        }
        expect(t, at, "}");
        return v;
      }
    }
    if (c == '[') {
      v.type = Type::array;
      ++at;
      skip_space(t, at);
      if (at < t.size() && t[at] == ']') {
        ++at;
        return v;
      }
      while (true) {
        v.array.push_back(read(t, at));
        skip_space(t, at);
        if (at < t.size() && t[at] == ',') {
          ++at;
          continue;
        }
        expect(t, at, "]");
        return v;
      }
    }
    if (c == '"') {
      v.type = Type::string;
      v.string = read_string(t, at);
      return v;
    }
    if (c == 't' || c == 'f') {
      v.type = Type::boolean;
      v.boolean = c == 't';
      expect(t, at, v.boolean ? "true" : "false");
      return v;
    }
    if (c == 'n') {
      expect(t, at, "null");
      return v;
    }
    std::size_t start = at;
    if (at < t.size() && t[at] == '-') ++at;
    while (at < t.size() && ((t[at] >= '0' && t[at] <= '9') || t[at] == '.' || t[at] == 'e' || t[at] == 'E' ||
                             t[at] == '+' || t[at] == '-')) {
      ++at;
    }
    if (at == start) fail(at, "unexpected character");
    v.type = Type::number;
    v.number = std::stod(std::string(t.substr(start, at - start)));
    return v;
  }
};

}  // namespace redlock::test
