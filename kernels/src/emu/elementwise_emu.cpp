// elementwise.cu compiled as C++ for the CUDA emulator (namespace prefixgate::kernels::emu): the
// same source nvcc compiles, so CI tests the code that runs on the GPU.
#define PREFIXGATE_KERNELS_EMU 1
#include "../elementwise.cu"  // NOLINT(bugprone-suspicious-include)
