// make_cuda_ops() in a build without the CUDA kernels (no nvcc, or PREFIXGATE_CUDA off).
#include "prefixgate/kernels/ops.h"

namespace prefixgate::kernels {

bool built_with_cuda() {
  return false;
}

OpsResult make_cuda_ops(int) {
  OpsResult result;
  result.error =
      "this build has no CUDA support: configure with nvcc on the PATH and "
      "-DPREFIXGATE_CUDA=ON (see kernels/README.md)";
  return result;
}

}  // namespace prefixgate::kernels
