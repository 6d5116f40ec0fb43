#pragma once

/// @file
/// REDLOCK_API: what the shared library exports.

/// Marks what the library exports: it is built with hidden symbols.
#define REDLOCK_API __attribute__((visibility("default")))
