"""The container image's figures for BENCHMARKS.md ("the container image"):

* its size: uncompressed (podman's figure) and gzip-compressed (the bytes
  `podman save` writes, gzipped, as a registry would hold its layers);
* the time from `podman run` to the first `/readyz` 200 on the shipped
  config and plugins, with a cold compiled cache (an empty volume) and a
  warm one (the same volume again), ROUNDS times each;
* the echo call's throughput in a container against the same binary
  outside it: fresh servers per round on the same echo-only config, the
  container on the host network, alternating which goes first, wrk -t2
  -c64 for SECONDS each after 1 s of warm-up; the median of the ratios.

  python3 scripts/bench_image.py IMAGE [--rounds N] [--seconds S] [--bin HANGAR]

Run `scripts/image` first (it prints the image). Needs wrk (scripts/bench
installs it)."""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PODMAN = str(ROOT / "scripts" / "podman")
UID = 10001
ECHO = ('{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"echo","arguments":{"text":"hello"}}}')


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status(url):
    try:
        return urllib.request.urlopen(url, timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def wait_ready(port, proc, timeout=900):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited {proc.returncode}")
        if status(f"http://127.0.0.1:{port}/readyz") == 200:
            return
        time.sleep(0.02)
    raise SystemExit("not ready in time")


def container(image, port, cache, mounts=(), args=("serve",)):
    name = f"hangar-bench-{os.getpid()}-{port}"
    cmd = [PODMAN, "run", "--rm", "--name", name, "--network", "host", "--read-only",
           "-e", f"HANGAR_LISTEN=127.0.0.1:{port}", "-e", "RUST_LOG=warn",
           "-v", f"{cache}:/var/cache/hangar"]
    for m in mounts:
        cmd += ["-v", m]
    proc = subprocess.Popen([*cmd, image, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return name, proc


def stop(name, proc):
    subprocess.run([PODMAN, "stop", "-t", "10", name], capture_output=True)
    proc.wait(60)


def readyz_seconds(image, rounds):
    cold, warm = [], []
    for _ in range(rounds):
        cache = Path(tempfile.mkdtemp(prefix="hangar-bench-image-"))
        os.chown(cache, UID, UID)
        for into in (cold, warm):
            port = free_port()
            started = time.monotonic()
            name, proc = container(image, port, cache)
            wait_ready(port, proc)
            into.append(time.monotonic() - started)
            stop(name, proc)
        shutil.rmtree(cache, ignore_errors=True)
    return cold, warm


def wrk(port, script, seconds):
    url = f"http://127.0.0.1:{port}/mcp"
    subprocess.run(["wrk", "-t2", "-c64", "-d1s", "-s", script, url], capture_output=True)
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{seconds}s", "-s", script, url],
                         capture_output=True, text=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])


def echo_ratios(image, binary, rounds, seconds):
    work = Path(tempfile.mkdtemp(prefix="hangar-bench-echo-"))
    (work / "plugins").mkdir()
    shutil.copy(ROOT / "plugins" / "echo.wasm", work / "plugins")
    (work / "config").mkdir()
    (work / "config" / "hangar.toml").write_text('[server]\ncache_dir = "/var/cache/hangar"\n')
    cache = work / "cache"
    cache.mkdir()
    os.chown(cache, UID, UID)
    (work / "outside.toml").write_text(f'[server]\ncache_dir = "{work / "outside-cache"}"\n')
    script = work / "echo.lua"
    script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      'wrk.headers["Accept"] = "application/json, text/event-stream"\n'
                      f"wrk.body = '{ECHO}'\n")

    def inside():
        port = free_port()
        name, proc = container(image, port, cache, (f"{work / 'plugins'}:/plugins:ro",
                                                    f"{work / 'config'}:/etc/hangar:ro"))
        wait_ready(port, proc)
        rate = wrk(port, str(script), seconds)
        stop(name, proc)
        return rate

    def outside():
        port = free_port()
        proc = subprocess.Popen([binary, "serve", "--config", str(work / "outside.toml"),
                                 "--listen", f"127.0.0.1:{port}", "--plugins",
                                 str(work / "plugins")], env={**os.environ, "RUST_LOG": "warn"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(port, proc)
        rate = wrk(port, str(script), seconds)
        proc.terminate()
        proc.wait(30)
        return rate

    ratios = []
    for i in range(rounds):
        if i % 2 == 0:
            a, b = outside(), inside()
        else:
            b, a = inside(), outside()
        ratios.append(b / a)
        print(f"  round {i}: outside {a:.0f}/s, container {b:.0f}/s, ratio {b / a:.3f}",
              flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return ratios


def sizes(image):
    raw = int(subprocess.run([PODMAN, "image", "inspect", "--format", "{{.Size}}", image],
                             capture_output=True, text=True, check=True).stdout.strip())
    save = subprocess.Popen([PODMAN, "save", image], stdout=subprocess.PIPE)
    gz = subprocess.run(["gzip", "-6"], stdin=save.stdout, capture_output=True, check=True).stdout
    save.wait()
    return raw, len(gz)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("image")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--echo-rounds", type=int, default=8)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--bin", default=str(ROOT / "target" / "release" / "hangar"))
    args = p.parse_args()
    raw, gz = sizes(args.image)
    print(f"image {args.image}: {raw / 2**20:.1f} MiB uncompressed, {gz / 2**20:.1f} MiB gzipped",
          flush=True)
    cold, warm = readyz_seconds(args.image, args.rounds)
    print(f"podman run to /readyz 200, cold cache: {', '.join(f'{s:.1f}' for s in cold)} s")
    print(f"podman run to /readyz 200, warm cache: {', '.join(f'{s:.2f}' for s in warm)} s",
          flush=True)
    ratios = echo_ratios(args.image, args.bin, args.echo_rounds, args.seconds)
    print(f"echo in the container / outside: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)}")


if __name__ == "__main__":
    main()
