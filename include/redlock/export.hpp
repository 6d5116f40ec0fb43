#pragma once

// The library is built with hidden symbols; this marks what it exports.
#define REDLOCK_API __attribute__((visibility("default")))
