# Shared by the scripts: paths and the build steps every entry point needs.
# shellcheck shell=bash
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GUEST_OUT="$ROOT/target/wasm32-wasip2/guest"
SLIM_OUT="$ROOT/target/wasm32-unknown-unknown/guest"
TEST_PLUGINS="$ROOT/target/test-plugins"
HANGAR_BIN="${HANGAR_BIN:-$ROOT/target/release/hangar}"
# The host's crates: `hangar` and the crates beneath it (host/config,
# host/core, host/runtime), built, linted and unit-tested together.
HOST_CRATES=(-p hangar -p hangar-config -p hangar-core -p hangar-runtime)

# Example plugins shipped in plugins/, and guests only the tests load, by
# world: each group is built by its own cargo run, so the SDK is compiled
# with that world only (a component must carry just the world it exports).
TOOL_PLUGINS=(echo everything weather wordcount csv-report misbehave abuse stuck-list http-fetch kv-counter)
AUTH_PLUGINS=(api-key jwt)
MAPPER_PLUGINS=(redact normalize bad-mapper count-mapper)
# The `app` world (hangar-sdk's `app` feature, which replaces the `server`
# bindings): built apart so `everything` keeps the `server` world.
APP_PLUGINS=(sales-chart bad-meta)
EXAMPLE_PLUGINS=(echo weather wordcount csv-report api-key jwt redact normalize sales-chart units)
# Python plugins (componentize-py): directory:world.
PY_PLUGINS=(py-greet:tool py-shout:mapper py-http:tool-http py-notes:app)
PY_TOOLS="$ROOT/target/py-tools"
JS_TOOLS="$ROOT/target/js-tools"
COMPONENTIZE_JS_VERSION=0.23.0
# JavaScript plugins (componentize-js, installed once into $JS_TOOLS, which
# every build uses; each plugin's package.json pins the same version):
# directory:world, or directory:world:http for a plugin that uses fetch (built
# with wasi:http; the others are built with `-d http fetch-event`).
JS_PLUGINS=(js-reverse:tool js-http:tool:http js-notes:app)
TEST_ONLY_PLUGINS=(everything misbehave bad-mapper count-mapper abuse stuck-list http-fetch kv-counter bad-meta)
# Rust plugins that need no WASI, built slim: for wasm32-unknown-unknown, so
# the component imports nothing from WASI and a fresh instance costs less
# (docs/plugins.md). bad-mapper covers a slim guest's panic; misbehave, a
# WASI guest's.
SLIM_PLUGINS=(echo api-key normalize redact bad-mapper typed-echo units)
# Plain components: no hangar-sdk and no hangar:plugin world, each with its
# own WIT package in its wit/ folder, as a component written elsewhere would
# be. `units` is the shipped example (plugins/units); the others are the
# typed-export tests' (issue #41), in tests/plugins.
# Rust (plain wit-bindgen, one cargo run of their own):
PLAIN_PLUGINS=(typed-kitchen typed-echo units)
# Python (componentize-py): directory:world. JavaScript (componentize-js):
# directory:world, or directory:world:http when it uses fetch.
PLAIN_PY_PLUGINS=(py-typed:py-typed)
PLAIN_JS_PLUGINS=(js-typed:js-typed:http)

# Installs Debian package(s) $@, updating the package lists only when the
# first try fails (a fresh machine's lists may be stale or empty).
apt_install() {
  log "installing Debian's $*"
  if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null
  fi
}

# podman, buildah and runc (scripts/image, scripts/podman), and the
# containers.conf both read (see scripts/podman).
ensure_podman() {
  if ! command -v podman >/dev/null || ! command -v buildah >/dev/null || ! command -v runc >/dev/null; then
    apt_install podman buildah runc
  fi
  export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/scripts/containers.conf}"
}

# cargo-cyclonedx, which writes the release's SBOM (scripts/release), in
# $HANGAR_TOOLS as scripts/test's tools are. Built unoptimised (`--debug`):
# it runs for seconds; it installed in 1:53 here (123 crates, beside another
# build).
CYCLONEDX_VERSION=0.5.9
ensure_cyclonedx() {
  export HANGAR_TOOLS="${HANGAR_TOOLS:-$HOME/.cache/hangar-tools}"
  if ! "$HANGAR_TOOLS/bin/cargo-cyclonedx" cyclonedx --version 2>/dev/null | grep -q " $CYCLONEDX_VERSION\$"; then
    log "installing cargo-cyclonedx $CYCLONEDX_VERSION into $HANGAR_TOOLS (the release SBOM)"
    cargo install cargo-cyclonedx --version "$CYCLONEDX_VERSION" --locked --debug --root "$HANGAR_TOOLS"
  fi
}

# Each line says how long the run has taken so far ([m:ss]), so a log
# shows where the time goes.
HANGAR_RUN_START="${HANGAR_RUN_START:-$SECONDS}"
log() { printf '==> [%d:%02d] %s\n' $(((SECONDS - HANGAR_RUN_START) / 60)) $(((SECONDS - HANGAR_RUN_START) % 60)) "$*" >&2; }

ensure_toolchain() {
  local installed target
  installed="$(rustup target list --installed 2>/dev/null || true)"
  for target in wasm32-wasip2 wasm32-unknown-unknown; do
    if ! grep -qx "$target" <<<"$installed"; then
      log "installing the $target target"
      rustup target add "$target"
    fi
  done
}

# True when plugin $1 is built slim.
is_slim() {
  local s
  for s in "${SLIM_PLUGINS[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

# Where plugin $1's component is built.
guest_wasm() {
  if is_slim "$1"; then echo "$SLIM_OUT/${1//-/_}.wasm"; else echo "$GUEST_OUT/${1//-/_}.wasm"; fi
}

# Builds every guest component and puts it where it is loaded from.
build_plugins() {
  build_rust_plugins
  build_py_plugins
  build_js_plugins
  build_plain_py_plugins
  build_plain_js_plugins
  build_sandbox
}

# The host's toolchain. wasmtime 49 needs Rust 1.96 (`rust-version` in
# host/Cargo.toml); the guests build with the default rustup toolchain, which
# has the wasm32 targets. `host_toolchain` picks, once per run:
#   1. the default toolchain, if it is 1.96 or newer;
#   2. rustup's 1.96.0, installed (with clippy and rustfmt) if missing;
#   3. Debian's rustc-web/cargo-web (1.96 on bookworm-security), installed by
#      apt where rustup cannot download, linked as the rustup toolchain `deb`;
#   4. else it stops, naming the minimum.
# The choice is exported as RUSTUP_TOOLCHAIN by `host_cargo` only, so the
# guests' cargo runs are untouched.
HOST_RUST_MIN="${HOST_RUST_MIN:-1.96}"
HOST_RUST_PIN="${HOST_RUST_PIN:-1.96.0}"

# True when `rustc --version` output $1 is at least $HOST_RUST_MIN.
rust_new_enough() {
  local v
  v="$(sed -E -n 's/^rustc ([0-9]+\.[0-9]+)\..*/\1/p' <<<"$1")"
  [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$HOST_RUST_MIN" "$v" | sort -V | head -1)" = "$HOST_RUST_MIN" ]
}

host_toolchain() {
  [ -n "${HOST_TOOLCHAIN+set}" ] && return 0
  if rust_new_enough "$(rustc --version 2>/dev/null)"; then
    HOST_TOOLCHAIN=""
  elif rust_new_enough "$(rustup run "$HOST_RUST_PIN" rustc --version 2>/dev/null)" \
    || { log "the default Rust is older than $HOST_RUST_MIN: installing $HOST_RUST_PIN with rustup"
         rustup toolchain install "$HOST_RUST_PIN" --profile minimal --component clippy,rustfmt >&2; }; then
    HOST_TOOLCHAIN="$HOST_RUST_PIN"
  elif rust_new_enough "$(/usr/bin/rustc --version 2>/dev/null)" \
    || { command -v apt-get >/dev/null \
         && log "installing Debian's rustc-web and cargo-web (Rust $HOST_RUST_MIN)" \
         && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q rustc-web cargo-web >&2 \
         && rust_new_enough "$(/usr/bin/rustc --version 2>/dev/null)"; }; then
    rustup toolchain link deb /usr
    HOST_TOOLCHAIN=deb
  else
    log "Hangar's host needs Rust $HOST_RUST_MIN or newer; found $(rustc --version 2>/dev/null || echo none)."
    log "Install it (rustup toolchain install $HOST_RUST_PIN, or Debian's rustc-web and cargo-web) and run again."
    exit 1
  fi
  export HOST_TOOLCHAIN
  log "host toolchain: $(RUSTUP_TOOLCHAIN="${HOST_TOOLCHAIN:-${RUSTUP_TOOLCHAIN:-}}" rustc --version)${HOST_TOOLCHAIN:+ (rustup toolchain $HOST_TOOLCHAIN)}"
}

# cargo with the host's toolchain (see `host_toolchain`).
host_cargo() {
  host_toolchain
  if [ -n "$HOST_TOOLCHAIN" ]; then
    RUSTUP_TOOLCHAIN="$HOST_TOOLCHAIN" cargo "$@"
  else
    cargo "$@"
  fi
}

# cargo clippy with the host's toolchain. Debian's rustc-web has no clippy:
# there the lints run with the default toolchain's, told to ignore the
# `rust-version` it is older than (a check, not a build).
host_clippy() {
  host_toolchain
  if [ "$HOST_TOOLCHAIN" = deb ] && ! RUSTUP_TOOLCHAIN=deb cargo clippy --version >/dev/null 2>&1; then
    log "the host toolchain (Debian's rustc-web) has no clippy: linting with $(rustc --version)"
    cargo clippy --ignore-rust-version "$@"
  else
    host_cargo clippy "$@"
  fi
}

# cargo (a build, a test run) with the host's toolchain and clippy's lints
# at -D warnings on the workspace crates it compiles: clippy-driver (rustc
# with the lints, which `cargo clippy` runs behind a `cargo check`) compiles
# them, so one build lints and compiles. A `cargo clippy` apart would
# compile every dependency a second time, in check mode (~4 minutes here).
# Where the host toolchain has no clippy-driver (Debian's rustc-web), the
# lints run through `host_clippy` first and the build is plain.
# scripts/rustc-workspace runs the driver, and compiles the unit tests'
# harnesses unoptimised (see there).
host_cargo_linted() {
  host_toolchain
  local driver
  driver="$(rustup which --toolchain "${HOST_TOOLCHAIN:-$(rustup show active-toolchain 2>/dev/null | cut -d' ' -f1)}" \
    clippy-driver 2>/dev/null || true)"
  if [ -z "$driver" ] || [ ! -x "$driver" ]; then
    host_clippy --quiet --release --all-targets "${HOST_CRATES[@]}" -- -D warnings
    driver=""
  fi
  RUSTC_WORKSPACE_WRAPPER="$ROOT/scripts/rustc-workspace" HANGAR_CLIPPY_DRIVER="$driver" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" host_cargo "$@"
}

# Builds the Rust guests only (no python3 or npm needed): the examples into
# plugins/, the test guests into target/test-plugins.
build_rust_plugins() {
  ensure_toolchain
  local group p
  for group in TOOL_PLUGINS AUTH_PLUGINS MAPPER_PLUGINS APP_PLUGINS PLAIN_PLUGINS; do
    local -n members="$group"
    local wasi=() slim=()
    for p in "${members[@]}"; do
      if is_slim "$p"; then slim+=(-p "$p"); else wasi+=(-p "$p"); fi
    done
    log "building plugins: ${members[*]}"
    if [ ${#wasi[@]} -gt 0 ]; then
      (cd "$ROOT" && cargo build --quiet --target wasm32-wasip2 --profile guest "${wasi[@]}")
    fi
    # The linker and initial memory for this target are in .cargo/config.toml.
    if [ ${#slim[@]} -gt 0 ]; then
      (cd "$ROOT" && cargo build --quiet --target wasm32-unknown-unknown --profile guest "${slim[@]}")
    fi
  done
  mkdir -p "$TEST_PLUGINS"
  for p in "${EXAMPLE_PLUGINS[@]}"; do cp "$(guest_wasm "$p")" "$ROOT/plugins/$p.wasm"; done
  for p in "${TEST_ONLY_PLUGINS[@]}" "${PLAIN_PLUGINS[@]}"; do cp "$(guest_wasm "$p")" "$TEST_PLUGINS/$p.wasm"; done
}

# componentize-py in a virtualenv of its own, pinned.
ensure_componentize_py() {
  if [ ! -x "$PY_TOOLS/bin/componentize-py" ]; then
    log "installing componentize-py"
    python3 -m venv "$PY_TOOLS"
    "$PY_TOOLS/bin/pip" install --quiet --disable-pip-version-check "componentize-py==0.25.1"
  fi
}

# Builds each Python plugin unless its .wasm is newer than its source and the WIT.
build_py_plugins() {
  ensure_componentize_py
  local entry dir world out
  for entry in "${PY_PLUGINS[@]}"; do
    dir="${entry%%:*}"; world="${entry##*:}"; out="$ROOT/plugins/$dir.wasm"
    up_to_date "$out" "$ROOT/plugins/$dir" "$ROOT/sdk/python" && continue
    log "building $dir (Python, $world world)"
    # sdk/python: the helpers (hangar_app) a plugin may import.
    "$PY_TOOLS/bin/componentize-py" -d "$ROOT/wit" -w "$world" componentize \
      -p "$ROOT/plugins/$dir" -p "$ROOT/sdk/python" app -o "$out" >/dev/null
  done
}

# True when $1 (a built .wasm) is newer than every file of plugin dir $2 (and
# of any more folders given) and the WIT.
up_to_date() {
  local out="$1"; shift
  [ -f "$out" ] && [ -z "$(find "$@" "$ROOT/wit" -path "*/node_modules" -prune -o -newer "$out" -type f -print | head -1)" ]
}

build_js_plugins() {
  local entry dir world http
  for entry in "${JS_PLUGINS[@]}"; do
    IFS=: read -r dir world http <<<"$entry"
    componentize_js "$ROOT/plugins/$dir" "$ROOT/wit" "$world" "$http" "$ROOT/plugins/$dir.wasm" "$world world"
  done
}

# componentize-js (and the preview2-shim it imports without declaring it)
# in a folder of its own, once: one npm install for every JavaScript build.
ensure_componentize_js() {
  local cli="$JS_TOOLS/node_modules/@bytecodealliance/componentize-js/package.json"
  if ! grep -q "\"version\": \"$COMPONENTIZE_JS_VERSION\"" "$cli" 2>/dev/null; then
    log "installing componentize-js $COMPONENTIZE_JS_VERSION into $JS_TOOLS"
    mkdir -p "$JS_TOOLS"
    npm install --prefix "$JS_TOOLS" --no-audit --no-fund --no-save --loglevel=error \
      "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" "@bytecodealliance/preview2-shim@^0.17.4"
  fi
}

# Builds the JavaScript component in dir $1 (app.js) against WIT $2, world $3,
# into $5 unless up to date; $4 = http when it uses fetch; $6 says what it is.
componentize_js() {
  local src="$1" wit="$2" world="$3" http="$4" out="$5" what="$6"
  # sdk/js: the helpers (hangar-app.js) a plugin may import.
  up_to_date "$out" "$src" "$ROOT/sdk/js" && return 0
  # -d http fetch-event: no wasi:http import, unless the plugin uses fetch
  # (its requests then go through the operator's grants).
  local features=(-d http fetch-event)
  [ "$http" = http ] && features=(-d fetch-event)
  log "building $(basename "$src") (JavaScript, $what${http:+, with wasi:http})"
  # An app that imports the MCP Apps helpers gets a copy of them beside it
  # (componentize-js reads only files in the app's folder; git ignores it).
  if grep -q '"./hangar-app.js"' "$src/app.js"; then
    cp "$ROOT/sdk/js/hangar-app.js" "$src/hangar-app.js"
  fi
  ensure_componentize_js
  (
    cd "$src"
    node "$JS_TOOLS/node_modules/@bytecodealliance/componentize-js/src/cli.js" app.js \
      --wit "$wit" --world-name "$world" "${features[@]}" -o "$out" >/dev/null
  )
}

# The code sandbox (code mode's `run`, docs/code-mode.md): host/sandbox/js
# built with componentize-js against wit/code.wit's `code` world, with
# nothing of WASI (-d all five: it imports program-tools alone), into
# target/sandbox/code-js.wasm, where the binary looks by default. sucrase
# (TypeScript → JavaScript) is bundled beside app.js by esbuild, both
# installed once into $JS_TOOLS.
SUCRASE_VERSION=3.35.1
ESBUILD_VERSION=0.28.2
SANDBOX_OUT="$ROOT/target/sandbox/code-js.wasm"
PY_SANDBOX_OUT="$ROOT/target/sandbox/code-py.wasm"
build_sandbox() {
  build_py_sandbox
  local src="$ROOT/host/sandbox/js"
  up_to_date "$SANDBOX_OUT" "$src" "$ROOT/wit/code.wit" && return 0
  ensure_componentize_js
  if [ ! -f "$JS_TOOLS/node_modules/sucrase/package.json" ] \
    || ! grep -q "\"version\": \"$SUCRASE_VERSION\"" "$JS_TOOLS/node_modules/sucrase/package.json" \
    || [ ! -x "$JS_TOOLS/node_modules/.bin/esbuild" ]; then
    log "installing sucrase $SUCRASE_VERSION and esbuild $ESBUILD_VERSION into $JS_TOOLS (the code sandbox)"
    npm install --prefix "$JS_TOOLS" --no-audit --no-fund --no-save --loglevel=error \
      "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" "@bytecodealliance/preview2-shim@^0.17.4" \
      "sucrase@$SUCRASE_VERSION" "esbuild@$ESBUILD_VERSION"
  fi
  log "building the code sandbox (JavaScript, code world)"
  mkdir -p "$(dirname "$SANDBOX_OUT")"
  # esbuild resolves sucrase from $JS_TOOLS; the bundle is one ES module
  # (componentize-js reads only files in the app's folder; git ignores it).
  (
    cd "$JS_TOOLS"
    echo 'export { transform } from "sucrase";' >sucrase-entry.js
    node_modules/.bin/esbuild sucrase-entry.js --bundle --format=esm --platform=neutral \
      --main-fields=module,main --log-level=warning --outfile="$src/sucrase.js"
  )
  (
    cd "$src"
    node "$JS_TOOLS/node_modules/@bytecodealliance/componentize-js/src/cli.js" app.js \
      --wit "$ROOT/wit" --world-name code -d stdio random clocks http fetch-event \
      -o "$SANDBOX_OUT" >/dev/null
  )
}

# The Python sandbox: host/sandbox/py with componentize-py (CPython, which
# needs WASI; Hangar links it as it links a plugin granted nothing).
build_py_sandbox() {
  local src="$ROOT/host/sandbox/py"
  up_to_date "$PY_SANDBOX_OUT" "$src" && return 0
  ensure_componentize_py
  log "building the code sandbox (Python, code world)"
  mkdir -p "$(dirname "$PY_SANDBOX_OUT")"
  "$PY_TOOLS/bin/componentize-py" -d "$ROOT/wit" -w code componentize -p "$src" app -o "$PY_SANDBOX_OUT" >/dev/null
}

# The plain Python and JavaScript components of tests/plugins, each from its
# own wit/ folder, into $TEST_PLUGINS; skipped when up to date.
build_plain_py_plugins() {
  ensure_componentize_py
  local entry dir world src out
  mkdir -p "$TEST_PLUGINS"
  for entry in "${PLAIN_PY_PLUGINS[@]}"; do
    dir="${entry%%:*}"; world="${entry##*:}"
    src="$ROOT/tests/plugins/$dir"; out="$TEST_PLUGINS/$dir.wasm"
    up_to_date "$out" "$src" && continue
    log "building $dir (Python, plain component, $world world)"
    "$PY_TOOLS/bin/componentize-py" -d "$src/wit" -w "$world" componentize -p "$src" app -o "$out" >/dev/null
  done
}

build_plain_js_plugins() {
  local entry dir world http src
  mkdir -p "$TEST_PLUGINS"
  for entry in "${PLAIN_JS_PLUGINS[@]}"; do
    IFS=: read -r dir world http <<<"$entry"
    src="$ROOT/tests/plugins/$dir"
    componentize_js "$src" "$src/wit" "$world" "$http" "$TEST_PLUGINS/$dir.wasm" "plain component, $world world"
  done
}

build_host() {
  log "building hangar (release)"
  host_toolchain
  (cd "$ROOT" && host_cargo build --quiet --release -p hangar)
}
