#!/usr/bin/env python3
"""Start-up cost of plugins from a registry: 20 `oci://` sources, cold vs cached.

A real registry (Debian's `docker-registry`) on a free port; 20 distinct copies
of the echo component (each with its own custom section, so 20 layers and 20
compilations, nothing shared) pushed with `hangar push` to 20 repositories and
pinned by digest in one hangar.toml. Each run starts `hangar serve` and times it
from spawn to the first `/healthz` answer (the server listens only once every
plugin is loaded), in these states of `[server] cache_dir`:

  cold            empty: 20 pulls and 20 compilations
  pull only       the compiled components kept, `oci/` emptied: 20 pulls
  cached          everything kept: 20 manifest requests, no blob, no compilation
  cached, offline everything kept, the registry stopped: served from the cache
  plugins/ files  the same 20 files in plugins/, compiled cache kept (no registry)

    HANGAR_BIN=target/release/hangar scripts/bench_oci_pull.py [--runs 5] [--plugins 20]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGAR = Path(os.environ.get("HANGAR_BIN", ROOT / "target/release/hangar"))
REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
WORK = Path(tempfile.mkdtemp(prefix="hangar-bench-oci-"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def with_custom_section(wasm: bytes, name: str, payload: bytes) -> bytes:
    """The component with a custom section appended: other bytes, the same behaviour."""
    body = leb128(len(name)) + name.encode() + payload
    return wasm + b"\x00" + leb128(len(body)) + body


def wait_ready(url, proc, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"hangar exited {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # answered (503 while degraded): it is listening
        except OSError:
            time.sleep(0.005)
    raise SystemExit(f"{url} did not come up")


class Registry:
    def __init__(self):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.config = WORK / "registry.yml"
        self.config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {WORK / 'registry'}\n"
            f"http:\n  addr: {self.host}\n")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([REGISTRY, "serve", str(self.config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(f"http://{self.host}/v2/", self.proc, 20)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def start_time(config: Path, plugins: Path, expect_tools: int) -> float:
    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([str(HANGAR), "serve", "--config", str(config), "--listen",
                             f"127.0.0.1:{port}", "--plugins", str(plugins)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
        elapsed = time.monotonic() - t0
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
        except urllib.error.HTTPError as e:
            body = e.read()  # 503 while degraded (the offline runs)
        health = json.loads(body)
        if health["tools"] != expect_tools:
            raise SystemExit(f"expected {expect_tools} tools, /healthz says {health}")
        return elapsed
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--plugins", type=int, default=20)
    ap.add_argument("--component", default=str(ROOT / "plugins/echo.wasm"))
    args = ap.parse_args()
    wasm = Path(args.component).read_bytes()
    registry = Registry()
    registry.start()
    cache = WORK / "cache"
    files = WORK / "files"
    files.mkdir()
    empty = WORK / "empty"
    empty.mkdir()
    push_cfg = WORK / "push.toml"
    push_cfg.write_text(f'[registries]\ninsecure = ["{registry.host}"]\n')
    sources = ""
    for i in range(args.plugins):
        path = files / f"echo{i}.wasm"
        path.write_bytes(with_custom_section(wasm, "hangar-bench", f"copy {i}".encode()))
        ref = f"oci://{registry.host}/bench/echo{i}:1.0"
        out = subprocess.run([str(HANGAR), "push", str(path), ref, "--config", str(push_cfg)],
                             capture_output=True, text=True, check=True)
        digest = out.stdout.strip().splitlines()[-1]
        # Each plugin's one tool under its own name.
        sources += (f'[plugins.echo{i}]\nsource = "{ref}"\ndigest = "{digest}"\n'
                    f'tools = [{{ export = "echo", name = "echo{i}" }}]\n')
    config = WORK / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{cache}"\n'
                      f'[registries]\ninsecure = ["{registry.host}"]\n' + sources)
    local = WORK / "local.toml"
    local.write_text(f'[server]\ncache_dir = "{cache}"\n' + "".join(
        f'[plugins.echo{i}]\ntools = [{{ export = "echo", name = "echo{i}" }}]\n'
        for i in range(args.plugins)))

    results = {k: [] for k in ("cold", "pull only", "cached", "cached, offline", "plugins/ files")}
    for _ in range(args.runs):
        shutil.rmtree(cache, ignore_errors=True)
        results["cold"].append(start_time(config, empty, args.plugins))
        shutil.rmtree(cache / "oci")
        results["pull only"].append(start_time(config, empty, args.plugins))
        results["cached"].append(start_time(config, empty, args.plugins))
        results["plugins/ files"].append(start_time(local, files, args.plugins))
        registry.stop()
        results["cached, offline"].append(start_time(config, empty, args.plugins))
        registry.start()
    registry.stop()

    print(f"{args.plugins} plugins of {len(wasm)} bytes each, {args.runs} runs, "
          f"spawn to first /healthz answer")
    print("| cache_dir | median | min – max |")
    print("|---|---|---|")
    for name, times in results.items():
        ms = [t * 1000 for t in times]
        print(f"| {name} | {statistics.median(ms):.0f} ms | {min(ms):.0f} – {max(ms):.0f} ms |")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
