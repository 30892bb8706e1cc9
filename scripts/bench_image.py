"""The container image's figures for BENCHMARKS.md ("the container image"):

* its size: uncompressed (podman's figure) and gzip-compressed (the bytes
  `podman save` writes, gzipped, as a registry would hold its layers);
* the time from `podman run` to the first `/readyz` 200 on the shipped
  config and plugins, with a cold compiled cache (an empty volume) and a
  warm one (the same volume again), ROUNDS times each;
* the echo call in a container against the same binary outside it, both
  serving the same echo-only config (the container on the host network),
  both at once pinned to one core (the load on the other), each in a cgroup
  of its own, one `wrk -t1 -c8` each for SECONDS a round after a warm-up
  round: the median over the rounds of the calls/s ratio (container over
  outside) and of the CPU-per-call ratio (outside over container, each
  server's own CPU time from /proc over the calls wrk counted).

  python3 scripts/bench_image.py IMAGE [--rounds N] [--seconds S] [--bin HANGAR]

Run `scripts/image` first (it prints the image); `--bin` is the binary to
compare with, by default target/image/root/usr/local/bin/hangar, the very
file scripts/image put in the image (stripped of its line tables). Needs
wrk (scripts/bench installs it)."""
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


EXTRA = []  # --podman-arg: more `podman run` arguments


def container(image, port, cache, mounts=(), args=("serve",), pin=None):
    name = f"hangar-bench-{os.getpid()}-{port}"
    cmd = [PODMAN, "run", "--rm", "--name", name, "--network", "host", "--read-only", *EXTRA,
           *([f"--cpuset-cpus={pin}"] if pin else []),
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


CONNECTIONS = 8


def wrk(port, script, seconds, out):
    """wrk -t1 -cCONNECTIONS against port for `seconds`; puts its requests/s
    and request count in `out`."""
    url = f"http://127.0.0.1:{port}/mcp"
    text = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{CONNECTIONS}",
                           f"-d{seconds}s", "-s", script, url],
                          capture_output=True, text=True).stdout
    out["rate"] = float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1])
    out["calls"] = int(re.search(r"(\d+) requests in", text)[1])


def cpu_seconds(pid):
    """User + system CPU time of process `pid` and its threads, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def place_beside(pid, container_pid):
    """Moves process `pid` into a cgroup of its own beside the container's,
    in each cgroup v1 hierarchy that shares CPU or memory. Left at the root,
    each of its threads would weigh as much in the CPU scheduler as the
    container's whole group (podman's libpod_parent/libpod-ID), and on a
    saturated machine the container would get less CPU for that alone.
    Returns the folders made (remove them after)."""
    made = []
    for line in Path(f"/proc/{container_pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for ctrl in controllers.split(","):
            if ctrl not in ("cpu", "cpuacct", "memory"):
                continue
            root = Path("/sys/fs/cgroup") / ("cpu,cpuacct" if Path(
                "/sys/fs/cgroup/cpu,cpuacct").is_dir() and ctrl != "memory" else ctrl)
            folder = root / path.lstrip("/")
            beside = folder.parent / f"hangar-bench-outside-{pid}"
            if beside in made:
                continue
            beside.mkdir(exist_ok=True)
            (beside / "cgroup.procs").write_text(str(pid))
            made.append(beside)
    return made


def echo_ratios(image, binary, rounds, seconds):
    """Both servers at once on one core (CPU 1; the two wrk on CPU 0), each
    in a cgroup of its own, so the scheduler halves that core between them
    and what else the machine does falls on both alike: per round, the
    container's calls/s over the outside one's, and the outside one's CPU
    per call over the container's (the server process's own time, read from
    /proc: the container's process is a process of this machine too)."""
    import threading
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
    inside_port, outside_port = free_port(), free_port()
    name, inside = container(image, inside_port, cache, (f"{work / 'plugins'}:/plugins:ro",
                                                         f"{work / 'config'}:/etc/hangar:ro"),
                             pin="1")
    outside = subprocess.Popen(["taskset", "-c", "1", binary, "serve", "--config", str(work / "outside.toml"),
                                "--listen", f"127.0.0.1:{outside_port}", "--plugins",
                                str(work / "plugins")], env={**os.environ, "RUST_LOG": "warn"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(inside_port, inside)
    wait_ready(outside_port, outside)
    inside_pid = int(subprocess.run([PODMAN, "inspect", "--format", "{{.State.Pid}}", name],
                                    capture_output=True, text=True, check=True).stdout)
    groups = place_beside(outside.pid, inside_pid)
    rates, cpus = [], []
    try:
        for i in range(rounds + 1):
            got = {"in": {}, "out": {}}
            before = cpu_seconds(inside_pid), cpu_seconds(outside.pid)
            runs = [threading.Thread(target=wrk, args=(p, str(script), seconds, got[k]))
                    for k, p in (("in", inside_port), ("out", outside_port))]
            for t in runs:
                t.start()
            for t in runs:
                t.join()
            after = cpu_seconds(inside_pid), cpu_seconds(outside.pid)
            if i == 0:
                continue  # warm-up
            rate = got["in"]["rate"] / got["out"]["rate"]
            cpu_in = (after[0] - before[0]) / got["in"]["calls"] * 1e6
            cpu_out = (after[1] - before[1]) / got["out"]["calls"] * 1e6
            rates.append(rate)
            cpus.append(cpu_out / cpu_in)
            print(f"  round {i}: container {got['in']['rate']:.0f}/s ({cpu_in:.1f} us CPU a call), "
                  f"outside {got['out']['rate']:.0f}/s ({cpu_out:.1f} us): calls/s ratio "
                  f"{rate:.3f}, CPU ratio {cpu_out / cpu_in:.3f}", flush=True)
    finally:
        stop(name, inside)
        outside.terminate()
        outside.wait(30)
        for group in groups:
            group.rmdir()
        shutil.rmtree(work, ignore_errors=True)
    return rates, cpus


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
    p.add_argument("--echo-rounds", type=int, default=15)
    p.add_argument("--echo-only", action="store_true", help="skip the size and start-up figures")
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--bin", default=str(ROOT / "target" / "image" / "root" / "usr" / "local" /
                                        "bin" / "hangar"))
    p.add_argument("--podman-arg", action="append", default=[],
                   help="one more `podman run` argument, e.g. --podman-arg=--security-opt=seccomp=unconfined")
    args = p.parse_args()
    EXTRA.extend(args.podman_arg)
    if args.echo_only:
        rates, cpus = echo_ratios(args.image, args.bin, args.echo_rounds, args.seconds)
        for what, ratios in (("calls/s", rates), ("CPU per call (outside/container)", cpus)):
            print(f"echo, container against outside, {what}: median "
                  f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
                  f"max {max(ratios):.3f}, n={len(ratios)}")
        return
    raw, gz = sizes(args.image)
    print(f"image {args.image}: {raw / 2**20:.1f} MiB uncompressed, {gz / 2**20:.1f} MiB gzipped",
          flush=True)
    cold, warm = readyz_seconds(args.image, args.rounds)
    print(f"podman run to /readyz 200, cold cache: {', '.join(f'{s:.1f}' for s in cold)} s")
    print(f"podman run to /readyz 200, warm cache: {', '.join(f'{s:.2f}' for s in warm)} s",
          flush=True)
    rates, cpus = echo_ratios(args.image, args.bin, args.echo_rounds, args.seconds)
    for what, ratios in (("calls/s", rates), ("CPU per call (outside/container)", cpus)):
        print(f"echo, container against outside, {what}: median {statistics.median(ratios):.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)}")


if __name__ == "__main__":
    main()
