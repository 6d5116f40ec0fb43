// Included before every fragment that scripts/check-snippets.sh compiles.
// It stands for what the text around a snippet leaves to the reader: the
// library's header, the duration literals (10s, 2min), and the functions and
// data that the docs call "your own code". Declarations only: the snippets
// are compiled with -fsyntax-only and never linked.
#pragma once

#include <redlock/redlock.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;

struct Batch {};
extern const std::vector<Batch> batches;

void log(const std::string& line);
void alert(const std::string& what);
void work_until(std::chrono::steady_clock::time_point deadline);
void render(std::chrono::steady_clock::time_point deadline);
void export_batch(const Batch& batch);
void export_batch(const Batch& batch, std::uint64_t fencing_token);
void run_export(int permit);
void read_catalogue(std::uint64_t fencing_token);
void write_catalogue(std::uint64_t fencing_token);
