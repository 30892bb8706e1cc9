"""The services the suite talks to: PostgreSQL and Redis.

A machine that already runs them (DATABASE_URL / REDIS_URL, or the usual
127.0.0.1:5432 and :6379) lends them to the suite; one that does not gets
private servers on free ports, started at the first import and stopped when
the run ends — so no test skips or errors for a service nobody started.
Debian's `postgresql` and `redis-server` provide the binaries (`scripts/test`
installs them where missing). The chosen URLs go into the environment, so
every `hangar` process and script a test starts sees the same servers.
"""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def note(text: str) -> None:
    print(f"tests/services.py: {text}", file=sys.stderr, flush=True)


def pg_bindir() -> Path:
    """Where the PostgreSQL server binaries are: `pg_config --bindir` when it
    has them, else the newest /usr/lib/postgresql/N/bin."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30)
        bindir = Path(out.stdout.strip())
        if out.returncode == 0 and (bindir / "initdb").exists():
            return bindir
    except FileNotFoundError:
        pass
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not found:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are missing")
    return found[-1]


class PrivatePostgres:
    """A throwaway PostgreSQL cluster on a free port, in a temp folder, for
    tests that stop it or configure it (TLS). initdb refuses root, so when
    run as root the cluster belongs to the `postgres` user, in a folder it
    can reach (pytest's own temp folders are private to root)."""

    def __init__(self, settings: dict | None = None, files: dict | None = None):
        import tempfile
        self.bindir = pg_bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="hangar-pg-"))
        os.chmod(self.dir, 0o755)
        self.owner = None
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            self.owner = (pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, *self.owner)
        self.data = self.dir / "pgdata"
        self.port = free_port()
        # Files the server reads (certificates, keys): name -> (bytes, mode).
        for name, (content, mode) in (files or {}).items():
            path = self.dir / name
            path.write_bytes(content)
            os.chmod(path, mode)
            if self.owner:
                os.chown(path, *self.owner)
        self.settings = {"listen_addresses": "127.0.0.1", **(settings or {})}
        self.run(self.bindir / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres")

    def run(self, *cmd):
        argv = [str(c) for c in cmd]
        if self.owner:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    def ctl(self, action):
        # A setting may name a file of the cluster's folder as {dir}/NAME.
        options = f"-p {self.port} -k {self.dir} " + " ".join(
            f"-c {k}={str(v).replace('{dir}', str(self.dir))}" for k, v in self.settings.items())
        self.run(self.bindir / "pg_ctl", "-D", self.data, "-w", "-m", "fast", "-l", self.dir / "pg.log",
                 "-o", options, action)

    def path(self, name) -> Path:
        return self.dir / name

    def close(self):
        try:
            self.ctl("stop")
        except AssertionError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def postgres_works(url: str) -> bool:
    """True when `url` takes a query (a port that answers may be something else)."""
    u = urlsplit(url)
    if not answers(u.hostname or "127.0.0.1", u.port or 5432):
        return False
    out = subprocess.run(["psql", url, "-qAt", "-c", "SELECT 1"], capture_output=True,
                         text=True, timeout=30)
    return out.returncode == 0 and out.stdout.strip() == "1"


def redis_works(url: str) -> bool:
    """True when `url` answers PING with PONG."""
    u = urlsplit(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=2) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


_started: list = []


def _stop_all() -> None:
    for stop in reversed(_started):
        try:
            stop()
        except Exception as e:  # noqa: BLE001 - stopping is best effort at exit
            note(f"stopping a private server: {e}")


atexit.register(_stop_all)


def postgres_url() -> str:
    """The suite's PostgreSQL, started here when none answers."""
    url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    if postgres_works(url):
        os.environ["DATABASE_URL"] = url
        return url
    note(f"no PostgreSQL answers at {url}: starting a private one")
    pg = PrivatePostgres()
    pg.ctl("start")
    _started.append(pg.close)
    url = f"postgres://postgres@127.0.0.1:{pg.port}/test"
    admin = f"postgres://postgres@127.0.0.1:{pg.port}/postgres"
    out = subprocess.run(["psql", admin, "-qAt", "-c", "CREATE DATABASE test"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"creating the test database: {out.stderr}")
    os.environ["DATABASE_URL"] = url
    note(f"private PostgreSQL at {url}")
    return url


def redis_url() -> str:
    """The suite's Redis, started here when none answers."""
    url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    if redis_works(url):
        os.environ["REDIS_URL"] = url
        return url
    note(f"no Redis answers at {url}: starting a private one")
    binary = shutil.which("redis-server")
    if not binary:
        raise RuntimeError("redis-server is missing (scripts/test installs Debian's redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="hangar-redis-"))
    port = free_port()
    log = open(workdir / "redis.log", "w")
    proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", str(workdir)],
                            stdout=log, stderr=subprocess.STDOUT)

    def stop():
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)

    _started.append(stop)
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not redis_works(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the private redis-server did not start:\n"
                               + (workdir / "redis.log").read_text())
        time.sleep(0.05)
    os.environ["REDIS_URL"] = url
    note(f"private Redis at {url}")
    return url
