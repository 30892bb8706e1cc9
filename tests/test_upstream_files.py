"""Files through upstream MCP servers: `[files] shared_dir` and the adapters of
`[upstreams.NAME.adapters.TOOL]`. An `upload_consumer` tool gets the absolute
path of an upload of the caller's session where the client gave an
upload:// handle; an `artifact_producer` tool's file (written at a path
Hangar allocated, or found in its result by an output locator) becomes an
artifact:// resource of the session; a located path outside shared_dir (or in
its uploads/ or another call's artifacts/) is refused. The upstreams are real:
the official `@modelcontextprotocol/server-filesystem` from npm over stdio,
and FastMCP servers of the tests' own (tests/clients/locator_server.py over
stdio; tests/clients/upstream_server.py over Streamable HTTP, restarted to end
its sessions)."""

import base64
import json
import os
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from conftest import free_port, parse_reply, run_hangar, session, wait_for
from test_upstreams import Upstream

TESTS = Path(__file__).resolve().parent
FILESYSTEM = TESTS / "node_modules" / ".bin" / "mcp-server-filesystem"
LOCATOR = TESTS / "clients" / "locator_server.py"
ETC = "/etc/hostname" if os.path.isfile("/etc/hostname") else "/etc/passwd"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def fs_upstream(shared, extra=""):
    if not FILESYSTEM.exists():
        pytest.fail("@modelcontextprotocol/server-filesystem is not installed (npm install in tests/)")
    return f"""
[upstreams.fs]
command = [{json.dumps(str(FILESYSTEM))}, {json.dumps(str(shared))}]
timeout = "30s"

[upstreams.fs.adapters.read_text_file]
kind = "upload_consumer"
arguments = ["path"]
{extra}
"""


def locator_upstream(name):
    return f"""
[upstreams.{name}]
command = [{json.dumps(sys.executable)}, {json.dumps(str(LOCATOR))}]
args = ["stdio"]
timeout = "20s"
"""


def main_config(shared):
    return f"""
[files]
shared_dir = {json.dumps(str(shared))}

[uploads]
ttl = "30m"
max_file_bytes = 100000
{fs_upstream(shared)}
[upstreams.fs.adapters.write_file]
kind = "artifact_producer"
output_path_argument = "path"
allow_artifacts_download = true
{locator_upstream("loc")}
[upstreams.loc.adapters.report]
kind = "artifact_producer"
output_locator = {{ mode = "regex", pattern = 'saved to (\\S+)' }}

[upstreams.loc.adapters.report_whole]
kind = "artifact_producer"
output_locator = {{ mode = "regex", pattern = '/\\S+/whole-[a-z0-9]+\\.txt' }}

[upstreams.loc.adapters.structured]
kind = "artifact_producer"
output_locator = {{ mode = "structured", pointer = "/result/path" }}

[upstreams.loc.adapters.image]
kind = "artifact_producer"
output_locator = {{ mode = "embedded" }}

[upstreams.loc.adapters.image_raw]
kind = "artifact_producer"
output_locator = {{ mode = "embedded" }}
allow_raw_output = true
allow_artifacts_download = true

[upstreams.loc.adapters.embedded]
kind = "artifact_producer"
output_locator = {{ mode = "embedded" }}

[upstreams.loc.adapters.write_to]
kind = "artifact_producer"
output_path_argument = "out"
output_locator = {{ mode = "regex", pattern = 'saved to (\\S+)' }}
{locator_upstream("inp")}
[upstreams.inp.adapters.read_nested]
kind = "upload_consumer"
arguments = ["/options/file"]

[upstreams.inp.adapters.read_many]
kind = "upload_consumer"
arguments = ["paths"]
"""


class Env:
    pass


@pytest.fixture(scope="module")
def env(start_server, tmp_path_factory):
    e = Env()
    base = Path(os.path.realpath(tmp_path_factory.mktemp("upstream-files")))
    e.shared = base / "shared"
    e.shared.mkdir()
    e.elsewhere = e.shared / "elsewhere"
    e.elsewhere.mkdir()
    # A file beside shared_dir, outside it.
    e.outside = base / "outside.txt"
    e.outside.write_text("not to be taken\n")
    e.s = start_server(plugins=[], config=main_config(e.shared))
    return e


# --- helpers ----------------------------------------------------------------------------------


def upload(s, sid, name, data, ctype="text/plain"):
    r = httpx.post(s.url + "/uploads", files=[("file", (name, data, ctype))],
                   headers={"mcp-session-id": sid}, timeout=30)
    assert r.status_code == 201, r.text
    [up] = r.json()["uploads"]
    assert up["handle"].startswith("upload://") and up["handle"].endswith("/" + name), up
    return up["handle"]


def upload_path(e, sid, handle):
    """Where the contract keeps an upload: <shared_dir>/uploads/<area>/<id>/<name>."""
    _, _, upload_id, name = handle.split("/")
    return e.shared / "uploads" / sid / upload_id / name


def listed(c):
    r = c.request("tools/list")
    assert "result" in r, r
    return {t["name"]: t for t in r["result"]["tools"]}


def result_of(r):
    assert "result" in r, json.dumps(r)
    return r["result"]


def refusal(r):
    """(how the call was refused, its message): ("isError", the result's text)
    for a tool result with isError true, else ("jsonrpc-error", the error's
    message) or ("not refused", the reply)."""
    if "result" in r:
        res = r["result"]
        return ("isError" if res.get("isError") is True else "not refused"), texts(res) or json.dumps(res)
    if "error" in r:
        return "jsonrpc-error", r["error"].get("message", "")
    return "not refused", json.dumps(r)


def ok(r):
    res = result_of(r)
    assert res.get("isError") is not True, r
    return res


def texts(res):
    return "\n".join(b["text"] for b in res.get("content", []) if b.get("type") == "text")


def artifact_meta(res):
    meta = (res.get("_meta") or {}).get("artifact")
    assert meta is not None, res
    return meta


def artifact_uris(c):
    r = c.request("resources/list")
    assert "result" in r, r
    return {x["uri"] for x in r["result"]["resources"] if x["uri"].startswith("artifact://")}


def artifact_files(e, sid):
    area = e.shared / "artifacts" / sid
    return sorted(str(p) for p in area.rglob("*") if p.is_file() or p.is_symlink()) if area.exists() else []


def artifact_path(e, uri):
    """artifact://<area>/<call-id>/<name> -> <shared_dir>/artifacts/<area>/<call-id>/<name>"""
    assert uri.startswith("artifact://"), uri
    area, call_id, name = uri.removeprefix("artifact://").split("/")
    return e.shared / "artifacts" / area / call_id / name


def check_artifact(e, c, res, name, data, mime=None, download=False):
    """The result carries the artifact as the contract says, and it reads back as `data`."""
    meta = artifact_meta(res)
    uri = meta["artifact_uri"]
    assert uri.startswith(f"artifact://{c.session}/") and uri.endswith("/" + name), meta
    expected_keys = {"artifact_uri", "name", "size", "mimeType"} | ({"download_url"} if download else set())
    assert set(meta) == expected_keys, meta
    assert meta["name"] == name and meta["size"] == len(data), meta
    if mime:
        assert meta["mimeType"] == mime, meta
    links = [b for b in res["content"] if b.get("type") == "resource_link"]
    assert [b["uri"] for b in links] == [uri], res["content"]
    # On disk where the contract keeps it.
    path = artifact_path(e, uri)
    assert path.is_file() and not path.is_symlink(), path
    assert path.read_bytes() == data
    # Listed and read back in its session.
    assert uri in artifact_uris(c)
    [item] = c.request("resources/read", {"uri": uri})["result"]["contents"]
    if meta["mimeType"].startswith("text/"):
        assert "text" in item, item  # text for text types
    if "text" in item:
        assert item["text"].encode() == data
    else:
        assert base64.b64decode(item["blob"]) == data
    if download:
        url = meta["download_url"]
        assert url.startswith(e.s.url + "/"), url
        assert any(url in b["text"] for b in res["content"] if b.get("type") == "text"), res["content"]
        got = httpx.get(url, timeout=10)  # no session: the signed URL is enough
        assert got.status_code == 200 and got.content == data, got.text
    else:
        assert not any(e.s.url in b.get("text", "") for b in res["content"] if b.get("type") == "text"), \
            res["content"]
    return meta


# --- the premise of the restart tests -------------------------------------------------------


@pytest.fixture
def http_upstreams():
    started = []

    def start(port=None):
        u = Upstream(port).start()
        started.append(u)
        return u

    yield start
    for u in started:
        u.stop()


def test_a_restarted_fastmcp_answers_404_for_the_session_it_no_longer_knows(http_upstreams):
    """Hangar takes HTTP 404 as "session ended" (the spec's answer for an
    unknown Mcp-Session-Id): FastMCP must answer that for the retry to be
    meaningful."""
    u = http_upstreams()
    r = httpx.post(u.url, headers={"accept": "application/json, text/event-stream",
                                   "content-type": "application/json",
                                   "mcp-session-id": uuid.uuid4().hex},
                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert r.status_code == 404, (r.status_code, r.text)


# --- upload consumers -----------------------------------------------------------------------


def test_an_upload_consumer_argument_is_marked_in_the_listing(env):
    tools = listed(session(env.s))
    path = tools["fs.read_text_file"]["inputSchema"]["properties"]["path"]
    assert path.get("x-hangar-upload") is True, path
    assert "upload://" in path.get("description", ""), path
    # A tool without an adapter is listed as the upstream has it.
    assert "x-hangar-upload" not in json.dumps(tools["fs.list_directory"]["inputSchema"])


def test_an_upload_round_trips_through_read_text_file(env):
    c = session(env.s)
    body = "first line\nsecond line, ünïcode\n"
    handle = upload(env.s, c.session, "notes.txt", body.encode())
    # The contract's place for it, in shared_dir.
    assert upload_path(env, c.session, handle).read_text() == body
    res = ok(c.call("fs.read_text_file", {"path": handle}))
    assert texts(res) == body, res


def test_another_sessions_handle_and_an_unknown_handle_are_refused(env):
    a, b = session(env.s), session(env.s)
    handle = upload(env.s, a.session, "mine.txt", b"only for a")
    other = b.call("fs.read_text_file", {"path": handle})
    how_other, said = refusal(other)
    assert how_other != "not refused", said
    assert "not an upload of this session" in said, said
    unknown = handle.replace(handle.split("/")[2], "f" * 32)
    missing = a.call("fs.read_text_file", {"path": unknown})
    how_missing, said = refusal(missing)
    assert how_missing != "not refused", said
    assert "no such upload" in said, said
    # The owner still reads it.
    assert texts(ok(a.call("fs.read_text_file", {"path": handle}))) == "only for a"
    # Refused as any handle is ([server] errors = "jsonrpc", the default):
    # the validate error other tools' handles get.
    assert how_other == how_missing == "jsonrpc-error", json.dumps(other)
    assert other["error"]["data"]["stage"] == missing["error"]["data"]["stage"] == "validate"


def test_a_nested_pointer_and_an_array_of_handles_are_replaced(env):
    c = session(env.s)
    one = upload(env.s, c.session, "one.txt", b"uno")
    two = upload(env.s, c.session, "two.txt", b"dos")
    got = json.loads(texts(ok(c.call("inp.read_nested", {"options": {"file": one, "mode": "r"}}))))
    assert got == {"path": str(upload_path(env, c.session, one)), "text": "uno"}
    got = json.loads(texts(ok(c.call("inp.read_many", {"paths": [one, two]}))))
    assert got == [{"path": str(upload_path(env, c.session, one)), "text": "uno"},
                   {"path": str(upload_path(env, c.session, two)), "text": "dos"}]


def test_the_upload_url_helper(env):
    c = session(env.s)
    tools = listed(c)
    assert "fs_get_upload_url" in tools and "inp_get_upload_url" in tools
    # loc has only artifact producers: no helper.
    assert "loc_get_upload_url" not in tools
    assert "fs.fs_get_upload_url" not in tools and "loc.get_upload_url" not in tools
    res = ok(c.call("fs_get_upload_url", {}))
    url = env.s.url + "/uploads"
    assert res["structuredContent"] == {
        "upload_url": url,
        "method": "POST",
        "headers": {"Mcp-Session-Id": c.session},
        "form_field": "file",
        "ttl_seconds": 1800,
        "max_file_bytes": 100000,
        "consumers": ["fs.read_text_file: path"],
        "curl": f"curl -X POST -H 'Mcp-Session-Id: {c.session}' -F 'file=@FILE' {url}",
    }, res
    # What it says works: an upload made from it is read by the consumer.
    h = res["structuredContent"]
    r = httpx.request(h["method"], h["upload_url"], headers=h["headers"],
                      files=[(h["form_field"], ("helped.txt", b"via the helper", "text/plain"))], timeout=30)
    assert r.status_code == 201, r.text
    [up] = r.json()["uploads"]
    assert texts(ok(c.call("fs.read_text_file", {"path": up["handle"]}))) == "via the helper"


# --- artifact producers: the injected output path ------------------------------------------


def test_write_file_becomes_an_artifact(env):
    a, b = session(env.s), session(env.s)
    schema = listed(a)["fs.write_file"]["inputSchema"]
    assert "path" not in schema.get("required", []), schema
    assert "content" in schema.get("required", []), schema
    body = "written by server-filesystem\n"
    res = ok(a.call("fs.write_file", {"path": "sub/dir/notes.txt", "content": body}))
    meta = check_artifact(env, a, res, "notes.txt", body.encode(), mime="text/plain", download=True)
    # Another session neither lists nor reads it.
    assert meta["artifact_uri"] not in artifact_uris(b)
    assert "error" in b.request("resources/read", {"uri": meta["artifact_uri"]})
    # Nothing was written where the client's relative path would have put it.
    assert not (env.shared / "sub").exists()


def test_write_file_without_a_plain_name_writes_output(env):
    c = session(env.s)
    res = ok(c.call("fs.write_file", {"content": "no path given"}))
    check_artifact(env, c, res, "output", b"no path given", download=True)
    res = ok(c.call("fs.write_file", {"path": "..", "content": "dots"}))
    check_artifact(env, c, res, "output", b"dots", download=True)


# --- artifact producers: output locators ----------------------------------------------------


def test_a_regex_locator_copies_a_file_from_elsewhere_in_shared_dir(env):
    c = session(env.s)
    name = f"found-{uuid.uuid4().hex[:8]}.txt"
    src = env.elsewhere / name
    src.write_text("located by regex")
    res = ok(c.call("loc.report", {"text": f"all done: saved to {src} (3 rows)"}))
    check_artifact(env, c, res, name, b"located by regex", mime="text/plain")
    assert src.read_text() == "located by regex"  # copied, not moved
    assert f"saved to {src}" in texts(res)


def test_a_regex_without_a_group_takes_the_whole_match(env):
    c = session(env.s)
    name = f"whole-{uuid.uuid4().hex[:8]}.txt"
    src = env.elsewhere / name
    src.write_text("the whole match")
    res = ok(c.call("loc.report_whole", {"text": f"wrote {src} just now"}))
    check_artifact(env, c, res, name, b"the whole match")


def test_a_locator_finds_the_file_when_the_tool_ignored_the_injected_path(env):
    c = session(env.s)
    dest = env.elsewhere / f"ignored-{uuid.uuid4().hex[:8]}.txt"
    res = ok(c.call("loc.write_to", {"out": "wanted.txt", "content": "went elsewhere", "dest": str(dest)}))
    check_artifact(env, c, res, dest.name, b"went elsewhere")


def test_a_locator_may_point_into_the_calls_own_folder(env):
    c = session(env.s)
    res = ok(c.call("loc.write_to", {"out": "kept.txt", "content": "where I was told"}))
    meta = check_artifact(env, c, res, "kept.txt", b"where I was told")
    # The tool was given the allocated absolute path and said so.
    assert texts(res).startswith(f"saved to {artifact_path(env, meta['artifact_uri'])}"), res


def test_a_structured_locator(env):
    c = session(env.s)
    src = env.elsewhere / f"structured-{uuid.uuid4().hex[:8]}.csv"
    src.write_bytes(b"a,b\r\n1,2\r\n")
    res = ok(c.call("loc.structured", {"path": str(src)}))
    check_artifact(env, c, res, src.name, b"a,b\r\n1,2\r\n")
    assert res["structuredContent"]["result"]["path"] == str(src)


def test_an_embedded_image_becomes_the_artifact_and_leaves_the_result(env):
    c = session(env.s)
    res = ok(c.call("loc.image", {"caption": "a dot"}))
    assert not [b for b in res["content"] if b.get("type") == "image"], res["content"]
    assert "a dot" in texts(res)
    check_artifact(env, c, res, "image.png", PNG, mime="image/png")


def test_an_embedded_image_stays_with_allow_raw_output(env):
    c = session(env.s)
    res = ok(c.call("loc.image_raw", {"caption": "a dot, kept"}))
    [img] = [b for b in res["content"] if b.get("type") == "image"]
    assert base64.b64decode(img["data"]) == PNG and img["mimeType"] == "image/png"
    check_artifact(env, c, res, "image.png", PNG, mime="image/png", download=True)


def test_an_embedded_resource_is_named_by_its_uri(env):
    c = session(env.s)
    data = bytes(range(256)) * 3
    name = f"report-{uuid.uuid4().hex[:6]}.bin"
    res = ok(c.call("loc.embedded", {"name": name, "data_b64": base64.b64encode(data).decode()}))
    assert not [b for b in res["content"] if b.get("type") == "resource"], res["content"]
    check_artifact(env, c, res, name, data)


def test_no_match_passes_the_result_on_unchanged(env):
    c = session(env.s)
    before = artifact_uris(c)
    res = ok(c.call("loc.report", {"text": "nothing was written"}))
    assert res["content"] == [{"type": "text", "text": "nothing was written"}], res
    assert "artifact" not in (res.get("_meta") or {}), res
    assert artifact_uris(c) == before and artifact_files(env, c.session) == []


# --- escapes --------------------------------------------------------------------------------


def escape(env, c, kind):
    """The (tool, arguments) of one attempt to take a file Hangar must not."""
    if kind == "etc":
        return "loc.report", {"text": f"saved to {ETC}"}
    if kind == "dotdot":
        return "loc.report", {"text": f"saved to {env.shared}/../{env.outside.name}"}
    if kind == "symlinked_file":
        link = env.elsewhere / f"link-{uuid.uuid4().hex[:8]}.txt"
        link.symlink_to(env.outside)
        return "loc.report", {"text": f"saved to {link}"}
    if kind == "symlinked_folder":
        link = env.elsewhere / f"dir-{uuid.uuid4().hex[:8]}"
        link.symlink_to(env.outside.parent, target_is_directory=True)
        return "loc.report", {"text": f"saved to {link}/{env.outside.name}"}
    if kind == "other_sessions_upload":
        other = session(env.s)
        handle = upload(env.s, other.session, "secret.txt", b"the other session's")
        path = upload_path(env, other.session, handle)
        assert path.is_file()
        return "loc.report", {"text": f"saved to {path}"}
    if kind == "own_upload":
        handle = upload(env.s, c.session, "mine.txt", b"an upload, not an artifact")
        return "loc.report", {"text": f"saved to {upload_path(env, c.session, handle)}"}
    if kind == "another_calls_artifact":
        res = ok(c.call("fs.write_file", {"path": "first.txt", "content": "an earlier call's"}))
        path = artifact_path(env, artifact_meta(res)["artifact_uri"])
        assert path.is_file()
        return "loc.report", {"text": f"saved to {path}"}
    if kind == "structured_etc":
        return "loc.structured", {"path": ETC}
    if kind == "ignored_path_etc":
        # A tool that ignored its injected path and names a file outside.
        return "loc.write_to", {"out": "x.txt", "content": "x", "dest": str(env.outside.parent / "written.txt")}
    raise AssertionError(kind)


ESCAPES = ["etc", "dotdot", "symlinked_file", "symlinked_folder", "other_sessions_upload", "own_upload",
           "another_calls_artifact", "structured_etc", "ignored_path_etc"]


@pytest.mark.parametrize("kind", ESCAPES)
def test_a_located_path_outside_is_refused_and_creates_nothing(env, kind):
    c = session(env.s)
    tool, args = escape(env, c, kind)
    uris, files = artifact_uris(c), artifact_files(env, c.session)
    r = c.call(tool, args)
    how, said = refusal(r)
    assert how != "not refused", said
    assert "outside" in said, said
    res = r.get("result") or {}
    assert "artifact" not in (res.get("_meta") or {}), res
    assert not [b for b in res.get("content", []) if b.get("type") == "resource_link"], res
    assert artifact_uris(c) == uris
    assert artifact_files(env, c.session) == files
    # What was pointed at is untouched.
    assert env.outside.read_text() == "not to be taken\n"
    # The call fails at stage upstream ([server] errors = "jsonrpc", the default).
    assert how == "jsonrpc-error" and r["error"]["data"]["stage"] == "upstream", json.dumps(r)


def test_a_hard_link_to_a_file_outside_is_refused(env):
    """Beyond the contract's list (docs/files.md: "a regular file with one
    link"): a hard link in shared_dir has its real path inside it but is the
    outside file itself."""
    c = session(env.s)
    link = env.elsewhere / f"hard-{uuid.uuid4().hex[:8]}.txt"
    os.link(env.outside, link)
    uris, files = artifact_uris(c), artifact_files(env, c.session)
    r = c.call("loc.report", {"text": f"saved to {link}"})
    how, said = refusal(r)
    assert how != "not refused", said
    assert artifact_uris(c) == uris and artifact_files(env, c.session) == files
    assert env.outside.read_text() == "not to be taken\n"


# --- wiring and config ----------------------------------------------------------------------


def wiring_config(shared):
    return (f'[files]\nshared_dir = {json.dumps(str(shared))}\n'
            + fs_upstream(shared, "[upstreams.fs.adapters.no_such_tool]\nkind = \"upload_consumer\"\n"
                                  "arguments = [\"path\"]\n"))


def test_an_adapter_for_a_tool_the_upstream_lacks_degrades_health_only(start_server, tmp_path):
    shared = Path(os.path.realpath(tmp_path)) / "shared"
    shared.mkdir()
    s = start_server(plugins=[], config=wiring_config(shared))
    c = session(s)
    tools = listed(c)
    assert "fs.read_text_file" in tools and "fs_get_upload_url" in tools

    def degraded():
        h = httpx.get(s.url + "/healthz", timeout=10).json()
        return h["status"] == "degraded" and h

    health = wait_for(degraded, 30, "health to say the wiring is incomplete")
    problems = [p for p in health["problems"] if p["error"].startswith("adapter_wiring_incomplete")]
    assert len(problems) == 1 and "no_such_tool" in problems[0]["error"], health
    assert health["upstreams"]["fs"]["adapter_wiring_incomplete"] == ["no_such_tool"], health
    # The other tools and the adapter that is wired still work.
    handle = upload(s, c.session, "still.txt", b"still works")
    assert texts(ok(c.call("fs.read_text_file", {"path": handle}))) == "still works"
    assert "shared" in texts(ok(c.call("fs.list_allowed_directories", {})))


def test_hangar_check_names_incomplete_wiring(tmp_path):
    shared = Path(os.path.realpath(tmp_path)) / "shared"
    shared.mkdir()
    (tmp_path / "plugins").mkdir()
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path}/cache"\n' + wiring_config(shared))
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))
    lines = [ln for ln in out.stdout.splitlines() if "adapter_wiring_incomplete" in ln]
    assert lines, (out.returncode, out.stdout, out.stderr)


def test_adapters_need_shared_dir_and_shared_dir_replaces_the_dirs(tmp_path):
    shared = Path(os.path.realpath(tmp_path)) / "shared"
    shared.mkdir()
    (tmp_path / "plugins").mkdir()
    cfg = tmp_path / "hangar.toml"
    cfg.write_text(f'[server]\ncache_dir = "{tmp_path}/cache"\n' + fs_upstream(shared))
    out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))
    assert out.returncode != 0, out.stdout
    assert "shared_dir" in out.stdout + out.stderr, out.stdout + out.stderr
    for section in ("uploads", "artifacts"):
        cfg.write_text(f'[server]\ncache_dir = "{tmp_path}/cache"\n[files]\nshared_dir = "{shared}"\n'
                       f'[{section}]\ndir = "{tmp_path}/{section}"\n')
        out = run_hangar("check", "--config", str(cfg), "--plugins", str(tmp_path / "plugins"))
        assert out.returncode != 0, (section, out.stdout)
        assert "shared_dir" in out.stdout + out.stderr, out.stdout + out.stderr


# --- an HTTP upstream's session ended -------------------------------------------------------


def http_config(u, extra=""):
    return f"""
[upstreams.rs]
url = "{u.url}"
tools = ["whoami", "echo"]
{extra}
"""


def whoami(r):
    res = ok(r)
    return texts(res).split('"session": "')[1].split('"')[0]


def raw_call(c, name, arguments):
    c.next_id += 1
    r = c.post({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
    return r, parse_reply(r)


def test_a_restarted_http_upstream_is_retried_in_a_fresh_session(start_server, http_upstreams):
    u = http_upstreams(free_port())
    s = start_server(plugins=[], config=http_config(u))
    c = session(s)
    mine = c.session
    first = whoami(c.call("rs.whoami", {}))
    u.stop()
    http_upstreams(u.port)
    r, reply = raw_call(c, "rs.whoami", {})
    assert r.status_code == 200, r.text
    assert r.headers.get("mcp-session-id") in (None, mine), r.headers
    second = whoami(reply)
    assert second != first
    # One fresh upstream session: the next call uses it again.
    assert whoami(c.call("rs.whoami", {})) == second
    assert c.session == mine
    assert texts(ok(c.call("rs.echo", {"text": "after"}))) == "[after]"


def test_without_retries_an_ended_upstream_session_fails_the_call(start_server, http_upstreams):
    u = http_upstreams(free_port())
    s = start_server(plugins=[], config=http_config(u, "session_termination_retries = 0"))
    c = session(s)
    whoami(c.call("rs.whoami", {}))
    u.stop()
    http_upstreams(u.port)
    r = c.call("rs.whoami", {})
    how, said = refusal(r)
    assert how != "not refused", said
    assert "session" in said.lower(), said
    assert how == "jsonrpc-error" and r["error"]["data"]["stage"] == "upstream", json.dumps(r)
    # The ended session is forgotten: the next call opens a fresh one.
    whoami(c.call("rs.whoami", {}))
