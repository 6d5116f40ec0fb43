#pragma once

/// @file
/// The one header to include: every other public header.

#include <redlock/blocking.hpp>
#include <redlock/client.hpp>
#include <redlock/election.hpp>
#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/inspect.hpp>
#include <redlock/lock.hpp>
#include <redlock/mutex.hpp>
#include <redlock/options.hpp>
#include <redlock/result.hpp>
#include <redlock/stats.hpp>
#include <redlock/version.hpp>

/// Everything the library defines. Start with Client (asynchronous, on your
/// own libuv loop) or Redlock (blocking, thread-safe); Options says what
/// they need.
namespace redlock {}
