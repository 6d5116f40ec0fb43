#include "resolver.hpp"

#include <netdb.h>
#include <pthread.h>

#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

namespace redlock {

struct Lookup::Shared {
  std::mutex mutex;
  // The Lookup's async handle, null once the Lookup let go of it: the handle
  // is then closing, and uv_async_send must never reach it.
  uv_async_t* wake = nullptr;  // guarded by mutex
  bool answered = false;       // guarded by mutex
  int status = EAI_AGAIN;      // guarded by mutex
  Addresses addresses;         // guarded by mutex
};

namespace {

// The lookup thread. It holds its own reference to the shared state, so it
// may outlive the Lookup, the Master and the loop.
void resolve(const std::shared_ptr<Lookup::Shared>& shared, const std::string& host,
             const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int status = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  Addresses addresses;
  if (status == 0) {
    for (const addrinfo* a = result; a; a = a->ai_next) {
      if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage))
        continue;
      sockaddr_storage address{};
      std::memcpy(&address, a->ai_addr, a->ai_addrlen);
      addresses.push_back(address);
    }
    if (addresses.empty()) status = EAI_NONAME;
  }
  if (result) ::freeaddrinfo(result);

  std::lock_guard<std::mutex> lock(shared->mutex);
  if (!shared->wake) return;  // abandoned: nobody wants the answer
  shared->answered = true;
  shared->status = status;
  shared->addresses = std::move(addresses);
  uv_async_send(shared->wake);
}

// Starts `thread_fn` with every signal blocked, so that the application's
// signals go to its own threads, never to a lookup thread.
template <class Fn>
void start_detached(Fn thread_fn) {
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  try {
    std::thread(std::move(thread_fn)).detach();
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace

std::unique_ptr<Lookup> Lookup::start(uv_loop_t* loop, const std::string& host, int port, Callback cb) {
  try {
    std::unique_ptr<Lookup> lookup(new Lookup(std::make_shared<Shared>(), {}, std::move(cb)));
    lookup->wake_ = Handle<uv_async_t>(loop, lookup.get(), [](uv_loop_t* l, uv_async_t* a) {
      return uv_async_init(l, a, [](uv_async_t* h) {
        if (Lookup* self = owner_of<Lookup>(h)) self->on_answer();
      });
    });
    lookup->shared_->wake = lookup->wake_.get();  // no thread shares it yet: no lock needed
    start_detached(
        [shared = lookup->shared_, host, port = std::to_string(port)] { resolve(shared, host, port); });
    return lookup;
  } catch (const std::exception&) {
    // No thread (std::system_error) or no handle (std::runtime_error); the
    // Lookup, if made, closed its handle on the way out.
    return nullptr;
  }
}

Lookup::Lookup(std::shared_ptr<Shared> shared, Handle<uv_async_t> wake, Callback cb)
    : shared_(std::move(shared)), wake_(std::move(wake)), cb_(std::move(cb)) {
}

Lookup::~Lookup() {
  // Under the mutex, so that the thread either sent before this or never
  // will; wake_ closes right after, in its own destructor.
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->wake = nullptr;
}

void Lookup::on_answer() {
  int status = 0;
  Addresses addresses;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (!shared_->answered || !cb_) return;
    status = shared_->status;
    addresses = std::move(shared_->addresses);
  }
  auto cb = std::exchange(cb_, nullptr);
  cb(status, std::move(addresses));  // may destroy this Lookup: nothing after it
}

}  // namespace redlock
