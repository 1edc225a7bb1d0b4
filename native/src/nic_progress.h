// Internal, shared by the NIC implementations: the host thread that rings the doorbells of links
// whose queue pairs the GPU cannot ring itself (GPUNetIO's CPU-proxy protocol: the device publishes
// its producer index, the host writes the doorbell record and the NIC's register).
#ifndef SLIP_NIC_PROGRESS_H
#define SLIP_NIC_PROGRESS_H

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

template <class Link>
class NicProgress {
 public:
  // ring(link) rings what the device published since its last call; true when it rang anything
  // (the thread naps after a while without). Called under mutex().
  explicit NicProgress(std::function<bool(Link *)> ring) : ring_(std::move(ring)) {}
  NicProgress(const NicProgress &) = delete;
  NicProgress &operator=(const NicProgress &) = delete;
  ~NicProgress() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }

  // The link's doorbells are rung from now on; the thread starts with the first link.
  void add(Link *l) {
    std::lock_guard<std::mutex> g(m_);
    links_.push_back(l);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  // Once it returns, the thread no longer looks at the link.
  void remove(Link *l) {
    std::lock_guard<std::mutex> g(m_);
    links_.erase(std::remove(links_.begin(), links_.end(), l), links_.end());
  }
  // Held while ring() runs: state ring() reads is changed under it.
  std::mutex &mutex() { return m_; }

 private:
  void loop() {
    unsigned idle = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      bool rang = false;
      {
        std::lock_guard<std::mutex> g(m_);
        for (Link *l : links_) rang |= ring_(l);
      }
      if (rang) {
        idle = 0;
      } else if (++idle > 4096) {
        const timespec nap = {0, 20000};
        nanosleep(&nap, nullptr);
      } else {
        sched_yield();
      }
    }
  }

  std::function<bool(Link *)> ring_;
  std::mutex m_;
  std::vector<Link *> links_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

#endif
