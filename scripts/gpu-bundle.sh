#!/usr/bin/env bash
# A self-contained bundle of the engine's binaries for a GPU host that has glibc, the CUDA driver
# and toolkit, cmake and ninja, but none of the Debian -dev libraries this build uses.
# Builds the `static` preset (PREFIXGATE_STATIC=ON: static libstdc++, libgcc and archives, an
# $ORIGIN rpath), copies the executables to OUTDIR/bin (stripped) and the shared libraries they
# still need, other than glibc's and CUDA's, to OUTDIR/lib; checks with ldd that nothing else
# resolves outside the bundle, and runs the binaries from it. Then packs OUTDIR.tar.xz, which is
# what travels: each binary links OpenBLAS's kernels for every x86-64 core (~24 MB, Debian builds
# it with DYNAMIC_ARCH), which xz packs ~10x. Unpack on the host with `cmake -E tar xf`.
#
# Usage: scripts/gpu-bundle.sh OUTDIR [CMAKE_ARGS...]
#   e.g. scripts/gpu-bundle.sh build/gpu-bundle -DCMAKE_CUDA_ARCHITECTURES=90a-real
#        scripts/gpu-bundle.sh --check-config [CMAKE_ARGS...]
# The bundle is not built by scripts/test.sh: the static build costs minutes of CI time. CI runs
# --check-config instead (seconds): the preset configures, and the engine's link line is static
# where it promises to be.
set -euo pipefail

# The executables to bundle. A name the build tree does not define (a CUDA target on a machine
# without nvcc) is skipped with a message, so the list can name targets ahead of them.
# scripts/gpu-check.sh runs these three on the GPU host.
targets=(prefixgate-engine kernels_gpu_tests prefixgate-gpu-bench)
# What the host provides: glibc's parts and libgcc_s, and CUDA's driver and toolkit libraries.
system_libs='^(linux-vdso|libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv|libanl|ld-linux[^ ]*|libgcc_s)\.so'
cuda_libs='^lib(cuda|cudart|cublas|cublasLt|nvidia|nvrtc|nvJitLink)[^ ]*\.so'
# Linked from their .a under PREFIXGATE_STATIC (or header-only): never a .so on the link line.
static_deps='lib(spdlog|fmt|openblas|xxhash|utf8proc|re2|gtest|gmock)\.so'
# The packed bundle must fit the device machine's 64 MiB transfer with room to spare.
max_archive_mib=40

(($# >= 1)) || {
  echo "usage: $0 OUTDIR|--check-config [CMAKE_ARGS...]" >&2
  exit 2
}
arg=$1
out=$(realpath -m -- "$arg") # OUTDIR as given, from where the script was started
shift
cd "$(dirname "$0")/.."
build=$PWD/build/static
jobs=${JOBS:-$(nproc)}

if [[ $arg == --check-config ]]; then
  cmake --preset static "$@" >/dev/null
  link=$(ninja -C "$build" -t commands prefixgate-engine | tail -1)
  shared=$(grep -oE '[^ /]+\.so[.0-9]*' <<<"$link" | sort -u | tr '\n' ' ')
  echo "gpu-bundle: the static prefixgate-engine links these shared libraries: ${shared:-none}"
  # shellcheck disable=SC2016 # a literal $ORIGIN
  if [[ $link != *-static-libstdc++* || $link != *'$ORIGIN/../lib'* ]]; then
    echo "gpu-bundle: the static preset lost -static-libstdc++ or its \$ORIGIN rpath:" >&2
    echo "$link" >&2
    exit 1
  elif grep -qE "$static_deps" <<<"$link"; then
    echo "gpu-bundle: the static preset links a shared $(grep -oE "$static_deps" <<<"$link")" >&2
    exit 1
  fi
  exit 0
fi

# OUTDIR is replaced whole: only an earlier bundle (its marker file) or an empty folder.
if [[ -d $out && ! -e $out/.gpu-bundle && -n $(ls -A "$out") ]]; then
  echo "gpu-bundle: $out exists and is not a bundle: give a new folder" >&2
  exit 2
fi

echo "== configure and build the static preset ($build)"
cmake --preset static "$@" >/dev/null
available=$(cmake --build "$build" --target help)
present=()
for t in "${targets[@]}"; do
  if grep -q "^$t: " <<<"$available"; then
    present+=("$t")
  else
    echo "gpu-bundle: skipping $t: not a target of this build tree"
  fi
done
((${#present[@]})) || {
  echo "gpu-bundle: none of the targets exist" >&2
  exit 1
}
cmake --build "$build" -j "$jobs" --target "${present[@]}"

echo "== bundle into $out"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
touch "$out/.gpu-bundle"
for t in "${present[@]}"; do
  exe=$(find "$build" -path "$build/CMakeFiles" -prune -o -type f -name "$t" -perm -u+x -print -quit)
  [[ -n $exe ]] || {
    echo "gpu-bundle: built $t but found no executable of that name" >&2
    exit 1
  }
  strip --strip-unneeded -o "$out/bin/$t" "$exe"
  # ldd lists the transitive dependencies too, as the loader would resolve them here.
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $name =~ $system_libs || $name =~ $cuda_libs ]]; then
      continue
    elif [[ $path == "not" ]]; then
      echo "gpu-bundle: $t needs $name, which is not found here" >&2
      exit 1
    elif [[ ! -e $out/lib/$name ]]; then
      strip --strip-unneeded -o "$out/lib/$name" "$(realpath "$path")"
    fi
  done < <(ldd "$exe")
done

echo "== check that the bundle is self-contained"
status=0
for bin in "$out"/bin/*; do
  echo "-- ldd ${bin#"$out"/}"
  deps=$(env -u LD_LIBRARY_PATH ldd "$bin")
  echo "$deps"
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $name =~ $system_libs || $name =~ $cuda_libs ]] && continue
    # ldd prints the rpath as found: bin/../lib/NAME.
    [[ $path != "not" && $(realpath "$path") == "$out/lib/"* ]] && continue
    echo "gpu-bundle: ${bin##*/}: $name resolves to $path, outside the bundle" >&2
    status=1
  done <<<"$deps"
done
((status == 0)) || exit 1

# Runs each binary as a smoke test: PREFIX... BIN_DIR.
run_bundle() {
  local where=$1 bin_dir=$2 bin name
  shift 2
  for bin in "$out"/bin/*; do
    name=${bin##*/}
    case $name in
      prefixgate-engine) "$@" "$bin_dir/$name" --help >/dev/null ;;
      prefixgate-gpu-bench) "$@" "$bin_dir/$name" --emu >/dev/null ;;
      *_tests) "$@" "$bin_dir/$name" --gtest_brief=1 ;;
      *_bench) "$@" "$bin_dir/$name" --benchmark_list_tests >/dev/null ;;
      *) continue ;;
    esac
    echo "gpu-bundle: $name runs $where"
  done
}

echo "== run from the bundle"
run_bundle "from the bundle" "$out/bin" env -u LD_LIBRARY_PATH

# As bare as the GPU host gets: a root holding only the bundle and the host's files that the
# binaries load (glibc's, libgcc_s, CUDA's), at their paths. Needs root, for chroot and for /proc
# (the loader reads /proc/self/exe to expand $ORIGIN).
bare=$(mktemp -d)
cleanup() {
  umount "$bare/proc" 2>/dev/null || true
  rm -rf --one-file-system "$bare"
}
trap cleanup EXIT
mkdir -p "$bare/proc" "$bare/tmp"
if [[ $(id -u) == 0 ]] && mount --bind /proc "$bare/proc" 2>/dev/null; then
  for bin in "$out"/bin/*; do
    env -u LD_LIBRARY_PATH ldd "$bin" | grep -oE '/[^ ]+' | while read -r lib; do
      if [[ (${lib##*/} =~ $system_libs || ${lib##*/} =~ $cuda_libs) && ! -e $bare$lib ]]; then
        cp -L --parents "$lib" "$bare/"
      fi
    done
  done
  cp -a "$out" "$bare/bundle"
  echo "== run in a root with only these files and the bundle:" \
    "$(find "$bare" \( -path "$bare/bundle" -o -path "$bare/proc" \) -prune -o -type f -printf '/%P ')"
  run_bundle "in a root with only the bundle and the host's files" /bundle/bin chroot "$bare"
else
  echo "gpu-bundle: not root, or /proc cannot be mounted: skipping the run in a bare root"
fi

echo "== pack"
archive=$out.tar.xz
XZ_OPT="-6 -T0" tar -C "$(dirname "$out")" -cJf "$archive" "$(basename "$out")"
du -sh --apparent-size "$out/bin" "$out/lib"
echo "gpu-bundle: $out: $(du -sh --apparent-size "$out" | cut -f1) unpacked"
archive_bytes=$(stat -c %s "$archive")
echo "gpu-bundle: $archive: $((archive_bytes / 1024 / 1024)) MiB ($archive_bytes bytes)"
if ((archive_bytes > max_archive_mib * 1024 * 1024)); then
  echo "gpu-bundle: the archive is over $max_archive_mib MiB" >&2
  exit 1
fi
