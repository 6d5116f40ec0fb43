#include "holder_read.hpp"

#include <redlock/error.hpp>

#include <algorithm>
#include <utility>

#include "keys.hpp"
#include "quorum.hpp"
#include "resource_summary.hpp"
#include "scripts.hpp"

namespace redlock {
namespace {

std::size_t count(const Reply& reply) {
  return reply.type == Reply::Type::integer && reply.integer > 0 ? static_cast<std::size_t>(reply.integer)
                                                                 : 0;
}

}  // namespace

HolderRead::HolderRead(Token, std::size_t masters, std::string resource, Callback cb)
    : resource_(std::move(resource)),
      cb_(std::move(cb)),
      keys_(masters),
      read_(masters, false),
      left_(masters) {
}

std::shared_ptr<HolderRead> HolderRead::start(const std::vector<std::unique_ptr<Master>>& masters,
                                              const std::string& key_prefix, std::string resource,
                                              Callback cb) {
  std::string key = keys::lock(key_prefix, resource);
  auto command = Command::read(scripts::read_holder,
                               {key, keys::fencing(key), keys::queue(key), keys::shared_holders(key)});
  auto read = std::make_shared<HolderRead>(Token{}, masters.size(), std::move(resource), std::move(cb));
  for (const auto& m : masters) m->send(command, read);
  return read;
}

// {value or "", pttl, counter, queued, shared holders}; anything else is no answer.
void HolderRead::on_reply(const Master& from, const Reply& reply) {
  std::size_t i = from.index();
  if (i >= keys_.size() || read_[i]) return;
  const auto& e = reply.elements;
  if (from.voting() && !read_twice(from) && reply.type == Reply::Type::array && e.size() == 5 &&
      e[0].type == Reply::Type::string && e[1].type == Reply::Type::integer &&
      e[2].type == Reply::Type::string) {
    KeyReport& key = keys_[i];
    key.present = !e[0].str.empty();
    key.value = e[0].str;
    if (key.present) key.ttl = std::chrono::milliseconds{e[1].integer};
    key.fencing_counter = fencing_counter_of(e[2].str);
    key.waiting = count(e[3]);
    key.shared_holders = count(e[4]);
    read_[i] = true;
    run_ids_.push_back(from.run_id());
  }
  answered();
}

// Two endpoints that reach one server must not count twice.
bool HolderRead::read_twice(const Master& from) const {
  return !from.run_id().empty() &&
         std::find(run_ids_.begin(), run_ids_.end(), from.run_id()) != run_ids_.end();
}

void HolderRead::on_failure(const Master&, Failure) {
  answered();
}

void HolderRead::abandon(std::error_code error) {
  left_ = 0;
  if (auto cb = std::exchange(cb_, nullptr)) cb(error, ResourceReport{});
}

void HolderRead::answered() {
  if (left_ == 0 || --left_ > 0) return;
  std::vector<const KeyReport*> keys;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (read_[i]) keys.push_back(&keys_[i]);
  }
  auto cb = std::exchange(cb_, nullptr);
  if (!cb) return;
  int n = static_cast<int>(keys_.size());
  if (static_cast<int>(keys.size()) < quorum::majority(n)) {
    cb(make_error_code(errc::unavailable), ResourceReport{});
    return;
  }
  cb({}, summarize_resource(resource_, keys, n));
}

}  // namespace redlock
