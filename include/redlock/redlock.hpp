#pragma once

// The one header users include.
#include <redlock/blocking.hpp>
#include <redlock/client.hpp>
#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/inspect.hpp>
#include <redlock/lock.hpp>
#include <redlock/mutex.hpp>
#include <redlock/options.hpp>
#include <redlock/result.hpp>
#include <redlock/stats.hpp>
#include <redlock/version.hpp>
