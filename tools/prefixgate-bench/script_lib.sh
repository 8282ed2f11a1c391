# shellcheck shell=bash
# Shared by the measuring scripts beside it (`source` it, do not run it): a temporary folder and
# the processes a script starts, both cleaned up when it exits, and free loopback ports.
#
#   source "$HERE/script_lib.sh"
#   script_start prefixgate-instr     # sets TMP (/tmp/prefixgate-instr.XXXXXX) and pids=()
#   some_server --port "$(free_port)" & pids+=($!)

script_start() {
  TMP="$(mktemp -d "/tmp/$1.XXXXXX")"
  pids=()
  trap script_cleanup EXIT
}

script_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
