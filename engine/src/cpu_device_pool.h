// A fixed set of worker threads for the cpu device's parallel loops. The device runs OpenBLAS
// single-threaded and splits work itself, so that BLAS's own spinning workers never compete with
// the attention loops for the same cores.
//
//   WorkerPool pool(4);
//   pool.parallel_for(tasks, [&](std::size_t task, std::size_t worker) { ... });
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace prefixgate::engine::cpu {

class WorkerPool {
 public:
  // `threads` workers in all, counting the caller of parallel_for (so threads - 1 are started).
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::size_t size() const { return threads_.size() + 1; }

  // Calls fn(task, worker) once for each task in [0, tasks), tasks taken in order by whichever
  // worker is free (worker < size(); the caller is worker 0), and returns when all are done.
  // Not reentrant: fn must not call parallel_for.
  using Task = std::function<void(std::size_t task, std::size_t worker)>;
  void parallel_for(std::size_t tasks, const Task& fn);

 private:
  void run_tasks(std::size_t worker);
  void worker_main(std::size_t worker);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;  // workers wait here for a new generation
  std::condition_variable idle_;  // the caller waits here for busy_ == 0
  const Task* job_ = nullptr;
  std::size_t tasks_ = 0;
  std::atomic<std::size_t> next_task_{0};
  std::size_t generation_ = 0;
  std::size_t busy_ = 0;  // workers still on the current generation
  bool stop_ = false;
};

}  // namespace prefixgate::engine::cpu
