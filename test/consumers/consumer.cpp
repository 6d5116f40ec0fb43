// A program that uses an installed (or embedded) redlock the way a user's would:
// scripts/consumers.sh builds it with pkg-config, CMake and as a Meson
// subproject, runs it and checks what it prints.
#include <uv.h>
#include <redlock/redlock.hpp>

#include <cstdio>
#include <cstring>
#include <exception>

int main() {
  // The header it was compiled with and the library it runs with must agree.
  if (std::strcmp(redlock::version(), REDLOCK_VERSION_STRING) != 0) {
    std::fprintf(stderr, "header %s, library %s\n", REDLOCK_VERSION_STRING, redlock::version());
    return 1;
  }
  try {
    redlock::Options options;
    // Port 1 on loopback: nobody listens, and the Client is closed at once.
    options.masters.push_back(redlock::Endpoint::parse("redis://127.0.0.1:1"));
    uv_loop_t loop;
    uv_loop_init(&loop);
    {
      redlock::Client client(&loop, options);
      client.close(nullptr);
      uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (uv_loop_close(&loop) != 0) {
      std::fprintf(stderr, "the loop still had handles after close()\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("redlock %s %d.%d.%d\n", redlock::version(), REDLOCK_VERSION_MAJOR, REDLOCK_VERSION_MINOR,
              REDLOCK_VERSION_PATCH);
  return 0;
}
