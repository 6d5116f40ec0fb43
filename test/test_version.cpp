#include <catch2/catch.hpp>

#include <redlock/version.hpp>

#include <string>

TEST_CASE("the version macros, their string and version() agree", "[version]") {
  const std::string parts = std::to_string(REDLOCK_VERSION_MAJOR) + "." +
                            std::to_string(REDLOCK_VERSION_MINOR) + "." +
                            std::to_string(REDLOCK_VERSION_PATCH);
  CHECK(parts == REDLOCK_VERSION_STRING);
  CHECK(std::string(redlock::version()) == REDLOCK_VERSION_STRING);
}

TEST_CASE("the version is meson's project version", "[version]") {
  CHECK(std::string(REDLOCK_VERSION_STRING) == REDLOCK_TEST_PROJECT_VERSION);
}
