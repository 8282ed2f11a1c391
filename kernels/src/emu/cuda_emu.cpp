// The emulator's scheduler: one fiber per CUDA thread of the running block, switched round-robin
// at barriers. See cuda_emu.h.
//
// A kernel switches fibers at every shuffle and barrier, millions of times per test, so on
// x86-64 the switch is a few instructions of our own (callee-saved registers, the stack pointer,
// the SSE and x87 control words: what the System V ABI says survives a call); glibc's
// swapcontext also saves the signal mask with a system call each time, 100 times slower. Other
// architectures use swapcontext.
#include "cuda_emu.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prefixgate/base/check.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define PG_EMU_ASAN 1
#endif

namespace prefixgate::kernels::emu_rt {
namespace {

// Enough for the kernels' register arrays, and for ASan's larger frames.
constexpr std::size_t kStackBytes = 256 * 1024;

// What the GPU would refuse or hang on: the emulator stops, as a broken invariant.
[[noreturn]] void fail(const char* what) {
  PG_CHECK(false, std::string("cuda emulator: ") + what);
  __builtin_unreachable();
}

enum class Wait { kNone, kBlock, kWarp };

#if defined(__x86_64__)
extern "C" void prefixgate_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl prefixgate_emu_switch
  .type prefixgate_emu_switch, @function
prefixgate_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size prefixgate_emu_switch, .-prefixgate_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");

struct Context {
  void* sp = nullptr;
};

// A stack that "returns" into entry() on the first switch to it: the frame
// prefixgate_emu_switch pops (control words, six registers), then entry's address, placed so
// that entry starts with the stack aligned as after a call (rsp = 8 mod 16).
void make_context(Context& c, char* stack, std::size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t{15};
  auto* words = reinterpret_cast<std::uint64_t*>(top - 16);  // 16-byte aligned
  words[0] = reinterpret_cast<std::uint64_t>(entry);
  words[1] = 0;                      // entry's own return address: it never returns
  std::uint64_t* frame = words - 7;  // control words, r15, r14, r13, r12, rbx, rbp
  for (int i = 1; i < 7; ++i) frame[i] = 0;
  std::uint32_t mxcsr = 0;
  std::uint16_t fpu_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_control));
  frame[0] = mxcsr | (std::uint64_t{fpu_control} << 32);
  c.sp = frame;
}

void switch_context(Context& from, const Context& to) {
  prefixgate_emu_switch(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t uc{};
};

void make_context(Context& c, char* stack, std::size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}

void switch_context(Context& from, const Context& to) {
  swapcontext(&from.uc, &to.uc);
}
#endif

struct Fiber {
  uint3 index{};
  int linear = 0;
  Context context{};
  char* stack = nullptr;
  bool started = false;
  bool done = false;
  Wait wait = Wait::kNone;
  std::uint64_t wait_generation = 0;  // the barrier generation it waits to see pass
  std::uint64_t exchanges = 0;        // shuffles done: picks the slot buffer
#if PG_EMU_ASAN
  void* fake_stack = nullptr;
#endif
};

struct WarpState {
  int live = 0;
  int arrived = 0;
  std::uint64_t generation = 0;
  unsigned char slots[2][32][8] = {};
  std::uint64_t rounds[2][32] = {};  // 1 + the round each slot was written in; 0: never
};

struct BlockState {
  uint3 block_index{};
  dim3 grid{};
  dim3 block{};
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  // Dynamic shared memory, aligned as the GPU's (wmma needs 32 bytes; 128 to be safe).
  struct FreeShared {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, FreeShared> shared;
  int live = 0;
  int arrived = 0;
  std::uint64_t generation = 0;
  int current = 0;
  const std::function<void()>* kernel = nullptr;
  Context scheduler{};
#if PG_EMU_ASAN
  const void* scheduler_stack = nullptr;
  std::size_t scheduler_stack_size = 0;
#endif
};

// Fiber stacks, kept for the thread's next launches: mapped once, touched only as deep as the
// kernels go.
char* fiber_stack(std::size_t index) {
  thread_local std::vector<char*> stacks;
  while (stacks.size() <= index) {
    void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot map a fiber stack");
    stacks.push_back(static_cast<char*>(p));
  }
  return stacks[index];
}

// One block runs at a time, on the launching thread.
thread_local BlockState* g_block = nullptr;

Fiber& current_fiber() {
  if (g_block == nullptr) fail("CUDA built-in used outside a kernel launch");
  return g_block->fibers[static_cast<std::size_t>(g_block->current)];
}

bool runnable(const BlockState& b, const Fiber& f) {
  if (f.done) return false;
  switch (f.wait) {
    case Wait::kNone: return true;
    case Wait::kBlock: return b.generation != f.wait_generation;
    case Wait::kWarp:
      return b.warps[static_cast<std::size_t>(f.linear / 32)].generation != f.wait_generation;
  }
  return false;
}

// From a fiber back to the scheduler.
void switch_to_scheduler(bool exiting) {
  BlockState& b = *g_block;
  Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
#if PG_EMU_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &f.fake_stack, b.scheduler_stack,
                                 b.scheduler_stack_size);
#endif
  switch_context(f.context, b.scheduler);
  PG_CHECK(!exiting, "a finished fiber is never resumed");
#if PG_EMU_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &b.scheduler_stack, &b.scheduler_stack_size);
#endif
}

void fiber_main() {
  BlockState& b = *g_block;
#if PG_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b.scheduler_stack, &b.scheduler_stack_size);
#endif
  (*b.kernel)();
  Fiber& f = b.fibers[static_cast<std::size_t>(b.current)];
  f.done = true;
  // A thread that returns no longer holds back its block's or its warp's barrier.
  --b.live;
  if (b.arrived > 0 && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
  }
  WarpState& w = b.warps[static_cast<std::size_t>(f.linear / 32)];
  --w.live;
  if (w.arrived > 0 && w.arrived == w.live) {
    w.arrived = 0;
    ++w.generation;
  }
  switch_to_scheduler(/*exiting=*/true);
}

// Apart from run_block: getcontext (the fallback) returns twice, which would make GCC distrust
// (and warn about) every local of the scheduler loop.
[[gnu::noinline]] void prepare_fiber(Fiber& f) {
  f.started = true;
#if PG_EMU_ASAN
  // The stack's previous fiber never returned from fiber_main (it switched away for good), so
  // the redzones of its last frames are still poisoned; a new fiber starts on a clean stack.
  __asan_unpoison_memory_region(f.stack, kStackBytes);
#endif
  make_context(f.context, f.stack, kStackBytes, fiber_main);
}

void run_block(BlockState& b) {
  const int threads = static_cast<int>(b.block.x * b.block.y * b.block.z);
  b.live = threads;
  b.arrived = 0;
  b.current = 0;
  for (WarpState& w : b.warps) w = WarpState{};
  for (int t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[static_cast<std::size_t>(t)];
    f.linear = t;
    f.index = {static_cast<unsigned>(t) % b.block.x,
               (static_cast<unsigned>(t) / b.block.x) % b.block.y,
               static_cast<unsigned>(t) / (b.block.x * b.block.y)};
    f.started = false;
    f.done = false;
    f.wait = Wait::kNone;
    f.exchanges = 0;
    ++b.warps[static_cast<std::size_t>(t / 32)].live;
  }
  int finished = 0;
  int idle_scans = 0;
  int t = 0;
  while (finished < threads) {
    Fiber& f = b.fibers[static_cast<std::size_t>(t)];
    if (runnable(b, f)) {
      idle_scans = 0;
      f.wait = Wait::kNone;
      b.current = t;
      if (!f.started) prepare_fiber(f);
#if PG_EMU_ASAN
      void* fake_stack = nullptr;
      __sanitizer_start_switch_fiber(&fake_stack, f.stack, kStackBytes);
#endif
      switch_context(b.scheduler, f.context);
#if PG_EMU_ASAN
      __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
      if (f.done) ++finished;
    } else if (++idle_scans > 2 * threads) {
      fail(
          "deadlock: threads wait at a barrier (__syncthreads, __syncwarp or a shuffle) "
          "that other live threads of the block never reach");
    }
    t = (t + 1) % threads;
  }
}

}  // namespace

const uint3& thread_idx() {
  return current_fiber().index;
}
const uint3& block_idx() {
  current_fiber();
  return g_block->block_index;
}
const dim3& block_dim() {
  current_fiber();
  return g_block->block;
}
const dim3& grid_dim() {
  current_fiber();
  return g_block->grid;
}
int lane_id() {
  return current_fiber().linear % 32;
}
void* dynamic_shared() {
  current_fiber();
  return g_block->shared.get();
}

void sync_block() {
  BlockState& b = *g_block;
  Fiber& f = current_fiber();
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  f.wait = Wait::kBlock;
  f.wait_generation = b.generation;
  switch_to_scheduler(false);
}

void sync_warp() {
  BlockState& b = *g_block;
  Fiber& f = current_fiber();
  WarpState& w = b.warps[static_cast<std::size_t>(f.linear / 32)];
  if (++w.arrived == w.live) {
    w.arrived = 0;
    ++w.generation;
    return;
  }
  f.wait = Wait::kWarp;
  f.wait_generation = w.generation;
  switch_to_scheduler(false);
}

void exchange(const void* value, void* out, std::size_t bytes, int source_lane) {
  Fiber& f = current_fiber();
  WarpState& w = g_block->warps[static_cast<std::size_t>(f.linear / 32)];
  // Two slot buffers, alternating: a lane cannot write round k + 2 before every lane has read
  // round k, since round k + 1's rendezvous lies between. Each slot is stamped with its round,
  // so reading a lane that did not take part (it returned, or does not exist) is caught.
  const std::uint64_t round = f.exchanges++;
  const std::size_t buffer = round % 2;
  const auto lane = static_cast<std::size_t>(f.linear % 32);
  std::memcpy(w.slots[buffer][lane], value, bytes);
  w.rounds[buffer][lane] = round + 1;
  sync_warp();
  const auto source = static_cast<std::size_t>(source_lane);
  if (w.rounds[buffer][source] != round + 1) {
    fail("shuffle from a lane that does not exist or has returned");
  }
  std::memcpy(out, w.slots[buffer][source], bytes);
}

void launch(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel) {
  const std::size_t threads = std::size_t{block.x} * block.y * block.z;
  // The limits a launch on the GPU would fail on (compute capability 8.0 and 9.0).
  if (threads == 0 || threads > 1024) fail("block size must be 1..1024 threads");
  if (block.z > 64) fail("blockDim.z must be at most 64");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
    fail("grid dimensions must be >= 1, with y and z at most 65535");
  }
  if (shared_bytes > 227 * 1024) fail("dynamic shared memory must be at most 227 KB");
  if (g_block != nullptr) fail("a kernel launched from inside a kernel");
  BlockState b;
  b.grid = grid;
  b.block = block;
  b.kernel = &kernel;
  const std::size_t shared_alloc = (std::max<std::size_t>(shared_bytes, 1) + 127) / 128 * 128;
  b.shared.reset(static_cast<unsigned char*>(std::aligned_alloc(128, shared_alloc)));
  std::memset(b.shared.get(), 0, shared_alloc);
  b.fibers.resize(threads);
  for (std::size_t t = 0; t < threads; ++t) b.fibers[t].stack = fiber_stack(t);
  b.warps.resize((threads + 31) / 32);
  g_block = &b;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        b.block_index = {x, y, z};
        run_block(b);
      }
    }
  }
  g_block = nullptr;
}

}  // namespace prefixgate::kernels::emu_rt
