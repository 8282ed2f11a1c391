#!/usr/bin/env bash
# Installs the Debian packages prefixgate builds and tests with. Idempotent, and quiet when
# everything is already present: it only calls apt-get for what is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev          # Asio and Beast (header-only)
  libsimdjson-dev           # request parsing
  libxxhash-dev             # prefix-block hashes (XXH3)
  libspdlog-dev libfmt-dev  # logging
  libcli11-dev              # command-line parsing
  libyaml-cpp-dev           # configuration files
  libmimalloc-dev           # the gateway's allocator (per-request JSON trees, Beast buffers)
  libopenblas-dev           # cpu device GEMMs
  libutf8proc-dev           # Unicode categories and NFC for the BPE pre-tokenizer
  libre2-dev                # linear-time patterns for the volatile-content detectors
  libzmq3-dev               # vLLM/SGLang KV-event streams (ZeroMQ PUB/SUB, replay ROUTER)
  libgtest-dev libgmock-dev # unit tests
  libbenchmark-dev          # micro-benchmarks
  clang-14 libclang-rt-14-dev  # the fuzz preset: clang with libFuzzer and its sanitizers
  nodejs                    # test oracles (JSON.stringify, reference tokenizers); bundles npm
  chromium                  # the browser test of the gateway's /dashboard (playwright-core)
  iproute2                  # the network-fault tests (ip netns, veth, tc), run as root
  wrk                       # load for the overhead benchmarks and the profile-guided build's training
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# msgpack-c++ (header-only) decodes and encodes the KV-event payloads. Debian's
# libmsgpack-cxx-dev depends on libboost-dev (Boost 1.74), which conflicts with the
# libboost1.81-dev above, so apt cannot install it beside our Boost: its headers are unpacked
# from the same Debian package into /usr/local/include instead (built with MSGPACK_NO_BOOST).
if [[ ! -f /usr/include/msgpack.hpp && ! -f /usr/local/include/msgpack.hpp ]]; then
  echo "install-deps: unpacking libmsgpack-cxx-dev's headers into /usr/local/include"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  tmp=$(mktemp -d)
  chmod 755 "$tmp"  # apt downloads as _apt
  trap 'rm -rf "$tmp"' EXIT
  # The package lists may be missing on a machine that had every other package already.
  (cd "$tmp" && apt-get download -qq libmsgpack-cxx-dev) ||
    { "${sudo_cmd[@]}" apt-get update -qq && (cd "$tmp" && apt-get download -qq libmsgpack-cxx-dev); }
  dpkg-deb -x "$tmp"/libmsgpack-cxx-dev_*.deb "$tmp/root"
  "${sudo_cmd[@]}" mkdir -p /usr/local/include
  "${sudo_cmd[@]}" cp -r "$tmp/root/usr/include/." /usr/local/include/
fi
