"""Hot reload and graceful shutdown, black-box.

* A component copied into the plugins directory of a running server is
  served without a restart; removing it takes its tools away.
* A corrupt component keeps the catalog in service, and `/healthz` says why.
* A config edit is applied, also a ConfigMap-style `..data` symlink swap;
  SIGHUP reloads.
* Sessions with an open GET stream hear `notifications/tools/list_changed`;
  `initialize` advertises `listChanged`.
* A call in flight during a reload finishes on the catalog it started with.
* SIGTERM: the call running finishes and its answer arrives whole, new
  connections are refused, the process exits 0; past `shutdown_grace`
  calls still running are cancelled.
"""

import shutil
import signal
import threading

import httpx

from test_metrics import scrape, value
from conftest import plugin_path, session, wait_for
from test_mcp_offers import Stream


def tool_names(server):
    c = session(server)
    return {t["name"] for t in c.request("tools/list")["result"]["tools"]}


def health(server):
    return httpx.get(server.url + "/healthz", timeout=10).json()


def reloads(server):
    return health(server)["reload"]["reloads"]


def last_reload(server):
    return health(server)["reload"]["last"] or {}


def text_of(reply):
    return reply["result"]["content"][0]["text"]


def test_initialize_advertises_list_changed(start_server):
    server = start_server(plugins=("echo", "everything"))
    caps = session(server).request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}})["result"]["capabilities"]
    assert caps["tools"]["listChanged"] is True
    assert caps["prompts"]["listChanged"] is True
    assert caps["resources"]["listChanged"] is True


def test_a_component_copied_in_is_served_and_removing_it_takes_it_away(start_server):
    server = start_server(plugins=("echo",))
    assert "sleep_once" not in tool_names(server)
    c = session(server)
    stream = Stream(server, c.session)
    try:
        shutil.copy(plugin_path("abuse"), server.plugins_dir / "abuse.wasm")
        wait_for(lambda: "sleep_once" in tool_names(server), 30, "the copied component's tools")
        # The open stream heard that the tool list changed (and nothing about prompts:
        # the new component offers none).
        note = stream.next(timeout=10)
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
        assert text_of(c.call("sleep_once", {"seconds": 0})) == "slept 0 s"
        assert text_of(c.call("echo", {"text": "still"})) == "still"
        assert reloads(server) >= 1
        assert last_reload(server)["outcome"] == "applied"
        assert "tools" in last_reload(server)["changed"]

        (server.plugins_dir / "abuse.wasm").unlink()
        wait_for(lambda: "sleep_once" not in tool_names(server), 30, "the removed component's tools to go")
        assert stream.next(timeout=10)["method"] == "notifications/tools/list_changed"
        assert c.call("sleep_once", {"seconds": 0})["error"]["code"] == -32601
        assert "echo" in tool_names(server)
    finally:
        stream.close()
    assert server.alive()


def test_a_corrupt_component_keeps_the_catalog_in_service(start_server):
    server = start_server(plugins=("echo",))
    before = reloads(server)
    (server.plugins_dir / "broken.wasm").write_bytes(b"\x00asm garbage, not a component" * 50)
    last = wait_for(lambda: (l := last_reload(server)).get("outcome") == "failed" and l,
                    30, "the failed reload in /healthz")
    assert "broken.wasm" in last["error"], last
    report = health(server)
    assert report["reload"]["failed"] >= 1
    assert report["reload"]["reloads"] == before
    # The catalog in service goes on serving.
    assert text_of(session(server).call("echo", {"text": "served"})) == "served"
    assert "failed" in server.log_text() and "broken.wasm" in server.log_text()
    # Taking the broken file away clears the failure without a rebuild.
    (server.plugins_dir / "broken.wasm").unlink()
    wait_for(lambda: last_reload(server).get("outcome") == "unchanged", 30, "the failure to clear")
    assert reloads(server) == before


def test_a_configmap_style_symlink_swap_is_applied(tmp_path, shared_cache):
    """A Kubernetes ConfigMap volume: `hangar.toml -> ..data/hangar.toml`,
    `..data -> ..<timestamp>`; an update writes a new timestamped folder and
    renames a new `..data` link over the old one, so no event ever names
    `hangar.toml` itself."""
    import os

    from conftest import Server

    mount = tmp_path / "config"
    mount.mkdir()

    def publish(version, text):
        folder = mount / f"..2026_11_26_{version}"
        folder.mkdir()
        (folder / "hangar.toml").write_text(text)
        os.symlink(folder.name, mount / "..data_tmp")
        os.rename(mount / "..data_tmp", mount / "..data")
        return folder

    base = f'[server]\ncache_dir = "{shared_cache}"\n'
    first = publish("a", base)
    os.symlink("..data/hangar.toml", mount / "hangar.toml")
    server = Server(tmp_path / "work", ("echo",), config_file=mount / "hangar.toml").start()
    try:
        assert "echo" in tool_names(server)
        publish("b", base + '[plugins.echo]\nprefix = "swapped."\n')
        shutil.rmtree(first)
        wait_for(lambda: "swapped.echo" in tool_names(server), 30, "the swapped config's prefix")
        assert "echo" not in tool_names(server)
        assert last_reload(server)["outcome"] == "applied"
    finally:
        server.stop()


def test_a_config_edit_is_applied_and_a_broken_one_is_not(start_server):
    server = start_server(plugins=("echo",))
    assert "echo" in tool_names(server)
    original = server.config_path.read_text()
    server.config_path.write_text(original + '\n[plugins.echo]\nprefix = "reloaded."\n')
    wait_for(lambda: "reloaded.echo" in tool_names(server), 30, "the prefixed tool")
    assert "echo" not in tool_names(server)
    assert text_of(session(server).call("reloaded.echo", {"text": "hi"})) == "hi"
    # A config that does not parse leaves the catalog as it is.
    server.config_path.write_text(original + "\n[plugins.echo\n")
    last = wait_for(lambda: (l := last_reload(server)).get("outcome") == "failed" and l,
                    30, "the failed reload")
    assert "config" in last["error"]
    assert "reloaded.echo" in tool_names(server)
    # A setting that needs a restart is kept, and said so.
    server.config_path.write_text(original.replace("[server]\n", "[server]\npage_size = 7\n"))
    last = wait_for(lambda: (l := last_reload(server)).get("outcome") == "applied" and l,
                    30, "the reload back to the original")
    assert any("[server]" in s for s in last["needs_restart"]), last
    assert "echo" in tool_names(server)


def test_sighup_reloads(start_server):
    server = start_server(plugins=("echo",))
    assert text_of(session(server).call("echo", {"text": "before hup"})) == "before hup"
    before = reloads(server)
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: reloads(server) > before, 30, "the reload on SIGHUP")
    assert last_reload(server)["trigger"] == "signal"
    assert server.alive()
    assert text_of(session(server).call("echo", {"text": "after hup"})) == "after hup"
    # /metrics counts the reload, and its call counts survive the swap.
    samples = scrape(server)
    assert value(samples, "hangar_reloads_total") == reloads(server) >= 1
    assert value(samples, "hangar_calls_total", tool="echo", stage="-", outcome="ok") == 2


def call_in_thread(server, name, arguments):
    """Starts a tool call on its own connection; returns (thread, reply holder)."""
    reply = {}

    def run():
        try:
            r = httpx.post(server.url + f"/tools/{name}/call", json=arguments, timeout=120)
            reply["status"] = r.status_code
            reply["body"] = r.json()
        except httpx.HTTPError as e:
            reply["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, reply


def running_calls(server):
    """Guest instances in use: a sleeping call holds one while it runs."""
    return value(scrape(server), "hangar_wasm_instances_in_use", pool="tools")


def wait_until_running(server, before):
    """Waits until the call just started runs in its guest: its connection
    alone is not enough, since a request that has not arrived when the
    server stops is an idle connection, closed at once."""
    wait_for(lambda: running_calls(server) > before, 30, "the call to run")


def test_a_call_in_flight_during_a_reload_finishes(start_server):
    server = start_server(plugins=("echo", "abuse"))
    idle = running_calls(server)
    t, reply = call_in_thread(server, "sleep_once", {"seconds": 3})
    wait_until_running(server, idle)
    # The reload takes the running call's tool away.
    (server.plugins_dir / "abuse.wasm").unlink()
    wait_for(lambda: "sleep_once" not in tool_names(server), 30, "the reload")
    t.join(60)
    assert reply.get("status") == 200, reply
    assert reply["body"]["content"][0]["text"] == "slept 3 s"


def test_sigterm_lets_the_running_call_finish_and_refuses_new_connections(start_server):
    server = start_server(plugins=("echo", "abuse"), config='shutdown_grace = "30s"\n')
    idle = running_calls(server)
    t, reply = call_in_thread(server, "sleep_once", {"seconds": 3})
    wait_until_running(server, idle)
    server.proc.send_signal(signal.SIGTERM)

    def refused():
        try:
            httpx.get(server.url + "/healthz", timeout=5)
            return False
        except httpx.ConnectError:
            return True
    wait_for(refused, 30, "new connections to be refused")
    t.join(60)
    assert reply.get("status") == 200, reply
    assert reply["body"]["content"][0]["text"] == "slept 3 s"
    assert server.proc.wait(30) == 0


def test_calls_past_the_shutdown_grace_are_cancelled(start_server):
    server = start_server(plugins=("echo", "abuse"), config='shutdown_grace = "1s"\n')
    idle = running_calls(server)
    t, reply = call_in_thread(server, "sleep_once", {"seconds": 60})
    wait_until_running(server, idle)
    server.proc.send_signal(signal.SIGTERM)
    # The process exits well before the call would have ended; the call gets no answer.
    assert server.proc.wait(30) == 0
    t.join(30)
    assert "error" in reply, reply
    assert "cancelling them" in server.log_text()


def test_sigterm_ends_open_get_streams_instead_of_waiting_for_them(start_server):
    # A grace longer than the wait below: only ending the stream lets the process exit in time.
    server = start_server(plugins=("echo",), config='shutdown_grace = "120s"\n')
    c = session(server)
    stream = Stream(server, c.session)
    try:
        server.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: stream.ended.is_set(), 30, "the GET stream to end")
        assert server.proc.wait(30) == 0
    finally:
        stream.close()
