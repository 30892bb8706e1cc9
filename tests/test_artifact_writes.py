"""Artifact writes are capped while they happen: a guest that writes past
its call's quota into `/artifacts` gets an I/O error it can report, the
disk use of the artifacts folder never passes the quota, even mid-call,
and the call still answers. The host logs which quota refused the write.

A `descriptor.write` fails with the `wasi:filesystem` error code
`file-too-large` past `max_file_bytes` in one file and
`insufficient-space` past what the session has left; a write through an
output stream (what Rust's `std::fs` does, through wasi-libc) fails with a
stream error, which wasi-libc reports as a bare EIO (`I/O error`).

The `abuse` test guest's `artifact_flood` writes in 1 MiB chunks until a
write fails, then answers `wrote <n> bytes, then write: <error>`.
"""

import os
import threading

import pytest

from conftest import Mcp
from test_http_grants import log_line

MIB = 1 << 20
MAX_FILE = 3 * MIB
MAX_SESSION = 5 * MIB
# Far past the quota, yet small enough that a host without the cap writes
# it all quickly (and is caught by the disk sampler below).
FLOOD = 64 * MIB


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    store = tmp_path_factory.mktemp("artifact-writes") / "store"
    config = f'''
[artifacts]
dir = "{store}"
max_file_bytes = {MAX_FILE}
max_session_bytes = {MAX_SESSION}

[[tools]]
name = "artifact_flood"
limits = {{ deadline = "20s" }}
'''
    s = start_server(plugins=("echo", "abuse"), config=config)
    s.store = store
    return s


def disk_use(path):
    """Bytes of the files under `path` (their sizes; what a quota counts)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


class Sampler:
    """Measures the largest disk use of a folder while a call runs."""

    def __init__(self, path):
        self.path, self.peak = path, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, disk_use(self.path))
            self.done.wait(0.002)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, disk_use(self.path))


def flood(server, **args):
    """Calls artifact_flood in a new session; answers (its text, the
    client, the peak disk use of the session's folder during the call)."""
    c = Mcp(server.url)
    c.initialize()
    with Sampler(server.store / c.session) as sampler:
        r = c.call("artifact_flood", {"bytes": FLOOD, **args})
    result = r.get("result")
    assert result is not None and result["isError"] is False, r
    return result["content"][0]["text"], c, sampler.peak


def written(text):
    return int(text.split()[1])


def quota_line(server, why):
    return log_line(server, "artifacts: a write of plugin abuse refused:", why)


def test_one_file_stops_at_max_file_bytes_and_the_call_answers(server):
    text, c, peak = flood(server)
    assert written(text) == MAX_FILE, text
    assert "then write: I/O error" in text, text
    quota_line(server, f"a file would pass {MAX_FILE} bytes")
    assert peak <= MAX_FILE, f"{peak} bytes on disk during the call"
    # What was written is kept: one artifact of exactly the file quota.
    assert disk_use(server.store / c.session) == MAX_FILE
    arts = [r for r in c.request("resources/list")["result"]["resources"]
            if r["uri"].startswith("artifact://")]
    assert [a["size"] for a in arts] == [MAX_FILE]


def test_a_descriptor_write_fails_with_file_too_large(server):
    text, c, peak = flood(server, direct=True)
    assert written(text) == MAX_FILE and text.endswith("then write: file-too-large"), text
    assert peak <= MAX_FILE, f"{peak} bytes on disk during the call"
    assert disk_use(server.store / c.session) == MAX_FILE


def test_many_files_stop_at_the_session_quota(server):
    text, c, peak = flood(server, file_bytes=2 * MIB)
    assert written(text) == MAX_SESSION, text
    assert "then write: I/O error" in text, text
    quota_line(server, "a session or store quota is reached")
    assert peak <= MAX_SESSION, f"{peak} bytes on disk during the call"
    assert disk_use(server.store / c.session) == MAX_SESSION
    # The session is full: its next call can write nothing, and says so.
    r = c.call("artifact_flood", {"bytes": FLOOD, "direct": True})
    text = r["result"]["content"][0]["text"]
    assert written(text) == 0 and text.endswith("then write: insufficient-space"), text
    assert disk_use(server.store / c.session) == MAX_SESSION


def test_other_calls_answer_beside_a_flood(server):
    c = Mcp(server.url)
    c.initialize()
    results = []
    t = threading.Thread(target=lambda: results.append(
        c.call("artifact_flood", {"bytes": FLOOD, "file_bytes": MIB})))
    t.start()
    for _ in range(20):
        r = Mcp(server.url).call("echo", {"text": "still here"})
        assert r["result"]["content"][0]["text"] == "still here", r
    t.join(30)
    assert results and results[0]["result"]["isError"] is False, results


def test_calls_of_one_session_at_once_share_its_quota(server):
    """Three floods in one session at the same time: together they write
    the session's quota, never more, even mid-call."""
    c = Mcp(server.url)
    c.initialize()
    answers = []

    def one():
        mine = Mcp(server.url)
        mine.session = c.session
        answers.append(mine.call("artifact_flood", {"bytes": FLOOD, "file_bytes": MIB}))

    threads = [threading.Thread(target=one) for _ in range(3)]
    with Sampler(server.store / c.session) as sampler:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    texts = [a["result"]["content"][0]["text"] for a in answers]
    assert len(texts) == 3 and all("then write:" in t for t in texts), answers
    assert sum(written(t) for t in texts) == MAX_SESSION, texts
    assert sampler.peak <= MAX_SESSION, f"{sampler.peak} bytes on disk during the calls"
    assert disk_use(server.store / c.session) == MAX_SESSION
