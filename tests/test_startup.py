"""Discovery, the compiled-component cache, `hangar check`, and /healthz;
start-up beside another process (issue 65, item 7): the second waits on
the first's compile lock only for the component it needs (a process
compiles one component at a time, smallest first, and takes a component's
lock when its turn comes), and SIGTERM ends a start-up at any point of it,
compiling included."""

import os
import re
import shutil
import signal
import subprocess
import time

import httpx
import pytest

from conftest import HANGAR_BIN, Server, plugin_path, run_hangar, wait_for


def write_config(tmp_path, cache, extra=""):
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{cache}"\n{extra}')
    return cfg


def plugins_dir(tmp_path, *names):
    d = tmp_path / "plugins"
    d.mkdir()
    for n in names:
        shutil.copy(plugin_path(n), d / f"{n}.wasm")
    return d


def summary(out: str):
    m = re.search(r"(\d+) components \((\d+) from cache, (\d+) compiled\), (\d+) tools, "
                  r"\d+ resources, \d+ templates, \d+ prompts, (\d+) problems", out)
    assert m, out
    return tuple(int(x) for x in m.groups())


def test_second_start_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    cfg = write_config(tmp_path, cache)
    d = plugins_dir(tmp_path, "echo", "everything", "misbehave")
    first = run_hangar("check", "--config", str(cfg), "--plugins", str(d))
    assert first.returncode == 0, first.stdout + first.stderr
    assert summary(first.stdout) == (3, 0, 3, 41, 0)
    assert "3 resources, 1 templates, 5 prompts" in first.stdout
    assert "  template test://template/{id}/data (plugin everything)" in first.stdout
    second = run_hangar("check", "--config", str(cfg), "--plugins", str(d))
    assert second.returncode == 0
    assert summary(second.stdout) == (3, 3, 0, 41, 0)
    assert "echo.wasm (tool world, from cache)" in second.stdout

    # The serving path says the same in its startup log.
    s = Server(tmp_path / "srv", ["echo"], cache_dir=cache).start()
    try:
        assert re.search(r"from_cache=1 compiled=0", s.log_text()), s.log_text()
    finally:
        s.stop()


def test_processes_sharing_a_cache_compile_each_component_once(tmp_path):
    """Replicas started together with one cache_dir: the first to reach a
    component compiles it under the entry's lock, the other waits and reads
    it (without the lock both compile: each takes seconds here)."""
    cfg = write_config(tmp_path, tmp_path / "cache")
    d = plugins_dir(tmp_path, "everything", "misbehave")
    argv = [str(HANGAR_BIN), "check", "--config", str(cfg), "--plugins", str(d)]
    env = {**os.environ, "NO_COLOR": "1"}
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    counts = [summary(out) for out, _ in outs]
    assert sum(c[1] for c in counts) == 2 and sum(c[2] for c in counts) == 2, counts


def test_check_fails_on_a_missing_configured_plugin(tmp_path):
    cfg = write_config(tmp_path, tmp_path / "cache", "[plugins.weather]\n")
    d = plugins_dir(tmp_path, "echo")
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(d))
    assert out.returncode != 0
    assert "weather.wasm" in out.stdout


def test_check_fails_on_a_broken_wasm_naming_it(tmp_path):
    cfg = write_config(tmp_path, tmp_path / "cache")
    d = plugins_dir(tmp_path, "echo")
    (d / "broken.wasm").write_bytes(b"\0asm this is not a component")
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(d))
    assert out.returncode != 0
    assert "broken.wasm" in out.stdout and "not a valid component" in out.stdout
    assert summary(out.stdout)[3] == 1  # echo still loads


def test_check_rejects_unknown_config_keys(tmp_path):
    cfg = write_config(tmp_path, tmp_path / "cache", "[limits]\nfule = 3\n")
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(plugins_dir(tmp_path, "echo")))
    assert out.returncode != 0 and "fule" in out.stderr


def test_broken_plugin_is_skipped_and_health_is_degraded(tmp_path, shared_cache):
    s = Server(tmp_path, ["echo"], cache_dir=shared_cache)
    (s.plugins_dir / "broken.wasm").write_bytes(b"garbage")
    s.start()
    try:
        h = httpx.get(s.url + "/healthz").json()
        assert h["status"] == "degraded"
        assert [p["path"].endswith("broken.wasm") for p in h["problems"]] == [True]
        assert "broken.wasm" in s.log_text()
        assert httpx.get(s.url + "/tools/echo").status_code == 200
    finally:
        s.stop()


def test_healthy_server_says_ok(tmp_path, shared_cache):
    s = Server(tmp_path, ["echo"], cache_dir=shared_cache).start()
    try:
        h = httpx.get(s.url + "/healthz").json()
        assert {k: h[k] for k in ("status", "tools", "problems")} == {"status": "ok", "tools": 1, "problems": []}
        # No DB tool, so no result cache to report; the connection counts are there.
        assert "result_cache" not in h and h["http"]["connections"] >= 1
    finally:
        s.stop()


def test_duplicate_tool_names_stop_startup_naming_both_files(tmp_path):
    cfg = write_config(tmp_path, tmp_path / "cache")
    d = plugins_dir(tmp_path, "echo")
    shutil.copy(plugin_path("echo"), d / "echo-copy.wasm")
    out = run_hangar("serve", "--config", str(cfg), "--plugins", str(d), "--listen", "127.0.0.1:0", timeout=60)
    assert out.returncode != 0
    assert "echo.wasm" in out.stderr and "echo-copy.wasm" in out.stderr


def test_plugin_prefix_avoids_a_collision(tmp_path, shared_cache):
    s = Server(tmp_path, ["echo"], '[plugins.echo2]\nprefix = "alt."\n', shared_cache)
    shutil.copy(plugin_path("echo"), s.plugins_dir / "echo2.wasm")
    s.start()
    try:
        from conftest import Mcp
        c = Mcp(s.url)
        names = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
        assert {"echo", "alt.echo"} <= names
        assert c.call("alt.echo", {"text": "pre"})["result"]["content"][0]["text"] == "pre"
        assert c.call("echo", {"text": "plain"})["result"]["content"][0]["text"] == "plain"
    finally:
        s.stop()


def test_hangar_environment_variables_stand_in_for_the_flags(tmp_path, shared_cache):
    """HANGAR_CONFIG, HANGAR_LISTEN and HANGAR_PLUGINS (a container's way to
    configure); a flag given beside its variable wins."""
    import subprocess
    import time

    from conftest import HANGAR_BIN, free_port

    cfg = write_config(tmp_path, shared_cache)
    env_plugins = plugins_dir(tmp_path, "echo")
    flag_plugins = tmp_path / "flag-plugins"
    flag_plugins.mkdir()
    shutil.copy(plugin_path("everything"), flag_plugins / "everything.wasm")
    env = {"HANGAR_CONFIG": str(cfg), "HANGAR_PLUGINS": str(env_plugins), "NO_COLOR": "1"}

    checked = run_hangar("check", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"config: {cfg}" in checked.stdout
    assert f"plugins: {env_plugins}" in checked.stdout
    flagged = run_hangar("check", "--plugins", str(flag_plugins), env=env)
    assert f"plugins: {flag_plugins}" in flagged.stdout, flagged.stdout

    port = free_port()
    proc = subprocess.Popen([str(HANGAR_BIN), "serve"], cwd=tmp_path,
                            env={**env, "HANGAR_LISTEN": f"127.0.0.1:{port}",
                                 "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                tools = httpx.get(f"http://127.0.0.1:{port}/tools", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not listen on HANGAR_LISTEN"
                time.sleep(0.1)
        names = {t["name"] for t in tools["tools"]} if isinstance(tools, dict) else {t["name"] for t in tools}
        assert "echo" in names and not any(n.startswith("test_") for n in names), names
    finally:
        proc.terminate()
        proc.wait(30)


# A batch that takes a while to compile (the Python and JavaScript
# components take ~15 s of CPU each here), and a small component in it.
HEAVY = ["echo", "py-greet", "js-reverse"]


def listening(s: Server) -> bool:
    try:
        return httpx.get(s.url + "/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.xdist_group("startup")
def test_a_process_waits_for_one_compile_and_sigterm_ends_a_start_up(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "heavy").mkdir()
    (tmp_path / "light").mkdir()
    heavy = Server(tmp_path / "heavy", HEAVY, "", cache)
    light = Server(tmp_path / "light", ["echo"], "", cache)
    try:
        heavy.launch()
        wait_for(lambda: "compiling component" in heavy.log_text(), 60,
                 "the heavy process to start compiling")
        # The light process needs echo only: it compiles it itself, or waits
        # for the heavy one's compile of echo, or reads what that wrote —
        # never for the Python and JavaScript components.
        light.launch()
        wait_for(lambda: listening(light) or not heavy.alive() or listening(heavy), 600,
                 "either process to be ready")
        assert listening(light), "the light process waited for the heavy one's whole batch"
        assert not listening(heavy), "the heavy batch was done before the light process"
        r = httpx.post(light.url + "/tools/echo/call", json={"text": "ready"}, timeout=10)
        assert r.status_code == 200 and r.json()["content"][0]["text"] == "ready"

        # SIGTERM while the heavy process still compiles: it ends there.
        assert "listening on" not in heavy.log_text()
        heavy.proc.send_signal(signal.SIGTERM)
        asked = time.monotonic()
        code = heavy.proc.wait(30)
        took = time.monotonic() - asked
        assert code == 0, heavy.log_text()[-2000:]
        assert "stopped during start-up" in heavy.log_text()
        assert took < 10, f"SIGTERM took {took:.1f} s to end the start-up"
        # What it compiled before the stop is whole in the cache: the light
        # process's restart and another start read it back.
        light.stop()
        again = Server(tmp_path / "light", ["echo"], "", cache).start()
        try:
            assert 'origin="cache"' in again.log_text() or "origin=cache" in again.log_text()
        finally:
            again.stop()
    finally:
        heavy.stop()
        light.stop()
