#include "cpu_device_pool.h"

namespace prefixgate::engine::cpu {

WorkerPool::WorkerPool(std::size_t threads) {
  for (std::size_t w = 1; w < threads; ++w) threads_.emplace_back([this, w] { worker_main(w); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::run_tasks(std::size_t worker) {
  for (std::size_t t = next_task_.fetch_add(1); t < tasks_; t = next_task_.fetch_add(1)) {
    (*job_)(t, worker);
  }
}

void WorkerPool::parallel_for(std::size_t tasks, const Task& fn) {
  if (tasks == 0) return;
  if (threads_.empty() || tasks == 1) {
    for (std::size_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    next_task_.store(0);
    busy_ = threads_.size();
    ++generation_;
  }
  wake_.notify_all();
  run_tasks(0);
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return busy_ == 0; });
  job_ = nullptr;
}

void WorkerPool::worker_main(std::size_t worker) {
  std::size_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    // job_ and tasks_ were published under the mutex before generation_ changed.
    run_tasks(worker);
    std::lock_guard lock(mutex_);
    if (--busy_ == 0) idle_.notify_one();
  }
}

}  // namespace prefixgate::engine::cpu
