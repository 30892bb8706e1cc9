"""No two files of one host crate (`hangar`, `hangar-config`, `hangar-core`,
`hangar-runtime`) name each other, directly or around a loop.

`scripts/circles.py` resolves every `crate::`/`super::`/`self::` name to the
file that defines it (following `pub use`) and lists the strongly connected
groups; the layering between modules is `host/src/layers.rs`'s job, and
between crates Cargo's. Here: no crate's tree has a circle, and the reader
does find one when one is made."""

import shutil
import subprocess

import pytest
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "circles.py"


def run(src: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(src)], capture_output=True, text=True
    )


@pytest.mark.parametrize("crate", ["src", "config/src", "core/src", "runtime/src"])
def test_no_host_crate_has_a_circle(crate):
    out = run(ROOT / "host" / crate)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no circles between the" in out.stdout


def test_a_circle_is_found(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\n")
    (src / "a" / "mod.rs").write_text("mod inner;\npub use inner::Thing;\npub struct Top;\n")
    (src / "a" / "inner.rs").write_text("use crate::b::Other;\npub struct Thing(Other);\n")
    (src / "b.rs").write_text("use crate::a::Thing;\npub struct Other;\npub fn f(_: Thing) {}\n")
    out = run(src)
    assert out.returncode == 1, out.stdout
    # `crate::a::Thing` is a re-export: the arrow goes to the file defining it
    assert "b.rs -> a/inner.rs" in out.stdout
    assert "a/inner.rs -> b.rs" in out.stdout
    assert "a/mod.rs" not in out.stdout.split("circle of")[1]


def test_a_parent_and_child_naming_each_other_is_a_circle(tmp_path):
    src = tmp_path / "src"
    (src / "m").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod m;\n")
    (src / "m" / "mod.rs").write_text("mod child;\npub struct Shared;\npub fn go() { child::run() }\n")
    (src / "m" / "child.rs").write_text("use super::Shared;\npub fn run() { let _ = Shared; }\n")
    out = run(src)
    assert out.returncode == 1, out.stdout
    assert "m/child.rs -> m/mod.rs" in out.stdout


def test_unit_test_modules_do_not_count(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\n")
    (src / "a.rs").write_text("use crate::b::B;\npub struct A(B);\n")
    (src / "b.rs").write_text(
        "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
    )
    out = run(src)
    assert out.returncode == 0, out.stdout
