# Shared by the scripts: paths and the build steps every entry point needs.
# shellcheck shell=bash
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GUEST_OUT="$ROOT/target/wasm32-wasip2/guest"
TEST_PLUGINS="$ROOT/target/test-plugins"
HANGAR_BIN="$ROOT/target/release/hangar"

# Example plugins shipped in plugins/, and guests only the tests load.
EXAMPLE_PLUGINS=(echo everything)
TEST_ONLY_PLUGINS=(misbehave)

log() { printf '==> %s\n' "$*" >&2; }

ensure_toolchain() {
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    log "installing the wasm32-wasip2 target"
    rustup target add wasm32-wasip2
  fi
}

# Builds every guest component and puts it where it is loaded from.
build_plugins() {
  ensure_toolchain
  local args=()
  for p in "${EXAMPLE_PLUGINS[@]}" "${TEST_ONLY_PLUGINS[@]}"; do args+=(-p "$p"); done
  log "building plugins (${EXAMPLE_PLUGINS[*]} ${TEST_ONLY_PLUGINS[*]})"
  (cd "$ROOT" && cargo build --quiet --target wasm32-wasip2 --profile guest "${args[@]}")
  mkdir -p "$TEST_PLUGINS"
  for p in "${EXAMPLE_PLUGINS[@]}"; do cp "$GUEST_OUT/$p.wasm" "$ROOT/plugins/$p.wasm"; done
  for p in "${TEST_ONLY_PLUGINS[@]}"; do cp "$GUEST_OUT/$p.wasm" "$TEST_PLUGINS/$p.wasm"; done
}

build_host() {
  log "building hangar (release)"
  (cd "$ROOT" && cargo build --quiet --release -p hangar)
}
