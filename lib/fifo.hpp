#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace redlock {

/// A first-in, first-out queue in one vector that keeps its storage. A
/// std::deque allocates a block every few elements pushed (libstdc++'s hold
/// 512 bytes: 7 of Master's pending commands, so most rounds paid for one);
/// this one allocates only while it grows past the most it has held. Popped
/// slots at the front are reused by push_front, or dropped once they are
/// half of the vector.
template <class T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;
  using reverse_iterator = std::reverse_iterator<iterator>;

  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  /// Slots in use, popped ones at the front included (for tests).
  std::size_t slots() const { return items_.size(); }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }

  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const { return items_.end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }

  void push_back(T item) { items_.push_back(std::move(item)); }
  void push_front(T item) {
    if (head_ > 0) {
      items_[--head_] = std::move(item);
    } else {
      items_.insert(items_.begin(), std::move(item));
    }
  }
  void pop_front() {
    items_[head_] = T{};  // what it owns goes now, not when the slot is reused
    ++head_;
    if (head_ == items_.size()) {
      clear();
    } else if (head_ >= compact_after && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), begin());
      head_ = 0;
    }
  }
  /// Erases [first, last), a range of this queue's elements.
  iterator erase(iterator first, iterator last) { return items_.erase(first, last); }
  void clear() {
    items_.clear();
    head_ = 0;
  }
  void swap(Fifo& other) noexcept {
    items_.swap(other.items_);
    std::swap(head_, other.head_);
  }

 private:
  static constexpr std::size_t compact_after = 64;
  std::vector<T> items_;
  std::size_t head_ = 0;  // items_[0, head_) were popped
};

}  // namespace redlock
