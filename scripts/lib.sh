# Shared by the scripts: paths and the build steps every entry point needs.
# shellcheck shell=bash
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GUEST_OUT="$ROOT/target/wasm32-wasip2/guest"
TEST_PLUGINS="$ROOT/target/test-plugins"
HANGAR_BIN="$ROOT/target/release/hangar"

# Example plugins shipped in plugins/, and guests only the tests load, by
# world: each group is built by its own cargo run, so the SDK is compiled
# with that world only (a component must carry just the world it exports).
TOOL_PLUGINS=(echo everything misbehave)
AUTH_PLUGINS=(api-key jwt)
MAPPER_PLUGINS=(redact normalize bad-mapper)
EXAMPLE_PLUGINS=(echo everything api-key jwt redact normalize)
TEST_ONLY_PLUGINS=(misbehave bad-mapper)

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
  local group p
  for group in TOOL_PLUGINS AUTH_PLUGINS MAPPER_PLUGINS; do
    local -n members="$group"
    local args=()
    for p in "${members[@]}"; do args+=(-p "$p"); done
    log "building plugins: ${members[*]}"
    (cd "$ROOT" && cargo build --quiet --target wasm32-wasip2 --profile guest "${args[@]}")
  done
  mkdir -p "$TEST_PLUGINS"
  for p in "${EXAMPLE_PLUGINS[@]}"; do cp "$GUEST_OUT/${p//-/_}.wasm" "$ROOT/plugins/$p.wasm"; done
  for p in "${TEST_ONLY_PLUGINS[@]}"; do cp "$GUEST_OUT/${p//-/_}.wasm" "$TEST_PLUGINS/$p.wasm"; done
}

build_host() {
  log "building hangar (release)"
  (cd "$ROOT" && cargo build --quiet --release -p hangar)
}
