// A mutex that spins briefly before it sleeps: glibc's adaptive kind (PTHREAD_MUTEX_ADAPTIVE_NP).
//
// The routing lock (ReplicaSet) is taken by every server thread several times a request and held
// for a few microseconds. When two threads meet at it, a plain std::mutex puts the second to
// sleep in the kernel and wakes it with another system call when the first leaves: two system
// calls and a context switch for a wait shorter than either. The adaptive kind first retries for
// a bounded number of rounds (glibc.pthread.mutex_spin_count, 100 by default) and only then
// sleeps, so a short hold is waited out on the CPU. Uncontended, it costs what std::mutex does
// (one atomic exchange each way).
//
// Lockable, for std::lock_guard, std::unique_lock and std::scoped_lock.
#pragma once

#include <pthread.h>

namespace prefixgate::gateway::server {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mu_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void lock() { pthread_mutex_lock(&mu_); }
  bool try_lock() { return pthread_mutex_trylock(&mu_) == 0; }
  void unlock() { pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_;
};

}  // namespace prefixgate::gateway::server
