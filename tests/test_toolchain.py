"""scripts/lib.sh picks the host's toolchain (Rust 1.96+, issue 44): the
default when it is new enough, else rustup's pinned release, else Debian's
rustc-web linked as `deb`, else a clear error naming the minimum. Each case
runs the script's own `host_toolchain` against real toolchains."""

import os
import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN = (1, 96)


def rustc_version(toolchain):
    out = subprocess.run(["rustup", "run", toolchain, "rustc", "--version"], capture_output=True, text=True)
    m = re.match(r"rustc (\d+)\.(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


def choose(env):
    """Runs `host_toolchain` in a shell with `env` added: (exit code, the
    toolchain it picked, what it logged)."""
    out = subprocess.run(
        ["bash", "-c", 'source scripts/lib.sh; host_toolchain; echo "picked=[$HOST_TOOLCHAIN]"'],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in {**os.environ, **env}.items() if k != "HOST_TOOLCHAIN"})
    m = re.search(r"picked=\[(.*)\]", out.stdout)
    return out.returncode, (m.group(1) if m else None), out.stderr


def a_new_toolchain():
    """A toolchain of 1.96+ the scripts made available (the rustup pin or Debian's)."""
    for name in ("1.96.0", "deb"):
        v = rustc_version(name)
        if v and v >= MIN:
            return name
    raise AssertionError("no Rust 1.96+ toolchain: scripts/test's host_toolchain should have set one up")


def an_old_toolchain():
    """A toolchain older than 1.96: the machine's default where it is one,
    else a linked one whose rustc says 1.95 (the choice reads only that)."""
    for name in ("stable", "1.95.0"):
        v = rustc_version(name)
        if v and v < MIN:
            return name
    d = Path(tempfile.mkdtemp(prefix="old-rust-"))
    (d / "bin").mkdir()
    (d / "bin/rustc").write_text("#!/bin/sh\necho 'rustc 1.95.0 (linked by test_toolchain)'\n")
    (d / "bin/rustc").chmod(0o755)
    subprocess.run(["rustup", "toolchain", "link", "hangar-test-old", str(d)], check=True)
    return "hangar-test-old"


def test_a_default_that_is_new_enough_is_used_as_it_is():
    code, picked, log = choose({"RUSTUP_TOOLCHAIN": a_new_toolchain()})
    assert code == 0, log
    assert picked == "", log


def test_an_older_default_gets_rustups_pinned_release():
    code, picked, log = choose({"RUSTUP_TOOLCHAIN": an_old_toolchain()})
    assert code == 0, log
    assert picked == "1.96.0", log
    assert "host toolchain: rustc 1.96.0" in log


def test_without_rustups_release_it_falls_back_to_debians_rustc_web():
    # A pin rustup has no such release of: the Debian path (apt-get installs
    # rustc-web where /usr/bin/rustc is missing or old).
    code, picked, log = choose({"RUSTUP_TOOLCHAIN": an_old_toolchain(), "HOST_RUST_PIN": "0.0.1"})
    assert code == 0, log
    assert picked == "deb", log
    v = rustc_version("deb")
    assert v and v >= MIN, f"the linked deb toolchain is {v}"


def test_with_nothing_new_enough_it_stops_and_names_the_minimum():
    code, picked, log = choose({"RUSTUP_TOOLCHAIN": an_old_toolchain(), "HOST_RUST_PIN": "0.0.1",
                                "HOST_RUST_MIN": "99.0"})
    assert code != 0
    assert picked is None
    assert "needs Rust 99.0 or newer" in log, log
