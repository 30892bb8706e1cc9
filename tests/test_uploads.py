"""Uploads: POST /uploads stores a batch whole or not at all, within quotas;
upload:// handles work only in the session that uploaded them; a component
sees the uploaded files it was handed and nothing else of the disk; a DB
tool gets the bytes as a bound blob; uploads expire."""

import time

import httpx
import pytest

from conftest import Mcp, wait_for

FILES_SQL = "CREATE TABLE docs (name TEXT, body BLOB);\n"


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    work = tmp_path_factory.mktemp("uploads")
    (work / "files.sql").write_text(FILES_SQL)
    config = f'''
[uploads]
dir = "{work / 'store'}"
max_file_bytes = 64
max_session_bytes = 100
max_session_files = 3

[connectors.files]
kind = "sqlite"
path = "{work / 'files.db'}"
init = "{work / 'files.sql'}"

[[tools]]
name = "docs.store"
description = "Keeps an uploaded file in the database"
use = "files"
read_only = false
statement = "INSERT INTO docs (name, body) VALUES ({{{{ inputs.name }}}}, {{{{ inputs.file }}}}) RETURNING name, length(body) AS bytes, hex(body) AS hex, typeof(body) AS type"
inputs.name = {{ type = "string", required = true }}
inputs.file = {{ type = "string", required = true }}
consumes_uploads = ["file"]
'''
    s = start_server(plugins=("echo", "wordcount"), config=config)
    s.store = work / "store"
    return s


def session(server):
    c = Mcp(server.url)
    c.initialize()
    return c


def upload(server, files, session_id=None, headers=None):
    h = dict(headers or {})
    if session_id:
        h["mcp-session-id"] = session_id
    return httpx.post(server.url + "/uploads", files=files, headers=h, timeout=30)


def listed(server, session_id):
    r = httpx.get(server.url + "/uploads", headers={"mcp-session-id": session_id})
    assert r.status_code == 200, r.text
    return r.json()["uploads"]


def stored_files(server, session_id):
    area = server.store / session_id
    return sorted(p.name for p in area.rglob("*") if p.is_file()) if area.exists() else []


def test_a_batch_with_one_bad_part_stores_nothing(server):
    c = session(server)
    # One part over max_file_bytes (64): the good ones are not kept either.
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain")),
                        ("file", ("big.txt", b"x" * 65, "text/plain")),
                        ("file", ("b.txt", b"beta", "text/plain"))], c.session)
    assert r.status_code == 413, r.text
    assert "big.txt" in r.json()["error"] and "max_file_bytes" in r.json()["error"]
    assert "nothing was stored" in r.json()["error"]
    assert listed(server, c.session) == [] and stored_files(server, c.session) == []
    # A part that is not a file (no filename).
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain")), ("note", (None, b"just a field"))], c.session)
    assert r.status_code == 400, r.text
    assert "not a file" in r.json()["error"]
    # A name that is not one plain file name.
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain")), ("file", (".hidden", b"x", "text/plain"))],
               c.session)
    assert r.status_code == 400, r.text
    assert listed(server, c.session) == [] and stored_files(server, c.session) == []
    # The same good parts alone are stored, each with its handle.
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain")),
                        ("file", ("b.txt", b"beta", "text/plain"))], c.session)
    assert r.status_code == 201, r.text
    handles = [u["handle"] for u in r.json()["uploads"]]
    assert [h.rsplit("/", 1)[1] for h in handles] == ["a.txt", "b.txt"]
    assert all(h.startswith("upload://") for h in handles)
    assert [u["handle"] for u in listed(server, c.session)] == handles
    assert stored_files(server, c.session) == ["a.txt", "b.txt"]


def test_uploads_need_a_session_or_a_principal(server):
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain"))])
    assert r.status_code == 401 and "session" in r.json()["error"]
    r = upload(server, [("file", ("a.txt", b"alpha", "text/plain"))], "0123456789abcdef0123456789abcdef")
    assert r.status_code == 404
    c = session(server)
    r = httpx.post(server.url + "/uploads", content=b"{}", headers={
        "mcp-session-id": c.session, "content-type": "application/json"})
    assert r.status_code == 415 and "multipart/form-data" in r.json()["error"]


def test_quotas_give_clear_errors(server):
    c = session(server)
    r = upload(server, [("file", (f"f{i}.txt", b"12345", "text/plain")) for i in range(4)], c.session)
    assert r.status_code == 413
    assert "would hold 4 files, over its quota of 3 ([uploads] max_session_files" in r.json()["error"]
    assert upload(server, [("file", ("one.txt", b"x" * 60, "text/plain"))], c.session).status_code == 201
    r = upload(server, [("file", ("two.txt", b"y" * 60, "text/plain"))], c.session)
    assert r.status_code == 413
    assert "would hold 120 bytes, over its quota of 100 ([uploads] max_session_bytes; it holds 60)" in r.json()["error"]
    assert [u["name"] for u in listed(server, c.session)] == ["one.txt"]


def test_a_handle_works_only_in_its_own_session(server):
    a, b = session(server), session(server)
    [up] = upload(server, [("file", ("notes.txt", b"one two three", "text/plain"))], a.session).json()["uploads"]
    handle = up["handle"]
    r = a.call("wordcount", {"files": [handle]})
    assert r["result"]["isError"] is False, r
    assert r["result"]["structuredContent"]["total_words"] == 3
    # Another session, and a call with no session at all, are refused.
    r = b.call("wordcount", {"files": [handle]})
    assert "error" in r, r
    assert r["error"]["data"]["stage"] == "validate"
    assert "not an upload of this session" in r["error"]["message"]
    rest = httpx.post(server.url + "/tools/wordcount/call", json={"files": [handle]})
    assert rest.status_code == 500 and "not an upload of this session" in rest.text
    # A handle that names nothing is told apart.
    r = a.call("wordcount", {"files": [handle.replace(handle.split("/")[2], "f" * 32)]})
    assert "no such upload" in r["error"]["message"]
    # So is another session's handle given to a DB tool.
    r = b.call("docs.store", {"name": "x", "file": handle})
    assert "not an upload of this session" in r["error"]["message"]


def test_the_guest_sees_the_file_it_was_given_and_nothing_else(server):
    c = session(server)
    ups = upload(server, [("file", ("seen.txt", b"hello wide world\nsecond line", "text/plain")),
                          ("file", ("unseen.txt", b"not passed", "text/plain"))], c.session).json()["uploads"]
    seen = ups[0]["handle"]
    upload_id = seen.split("/")[2]
    r = c.call("wordcount", {"files": [seen]})
    assert r["result"]["isError"] is False, r
    sc = r["result"]["structuredContent"]
    # The handle became the path the guest sees the file at.
    assert sc["files"] == [{"path": f"/uploads/{upload_id}/seen.txt", "words": 5, "lines": 2, "bytes": 28}]
    # Its only folder is /uploads, holding just that file: no other upload,
    # no other session's, nothing else of the host's disk.
    assert sc["visible"] == [{"path": "/uploads", "files": [f"/uploads/{upload_id}/seen.txt"]}]
    # The staging folder of the call is gone once it ended.
    staging = server.store / ".calls"
    assert not staging.exists() or list(staging.iterdir()) == []


def test_the_guest_cannot_change_an_upload(server):
    c = session(server)
    [up] = upload(server, [("file", ("keep.txt", b"stays the same", "text/plain"))], c.session).json()["uploads"]
    # Two calls see the same bytes: nothing the first did could write.
    for _ in range(2):
        r = c.call("wordcount", {"files": [up["handle"]]})
        assert r["result"]["structuredContent"]["files"][0]["bytes"] == 14
    [path] = [p for p in (server.store / c.session).rglob("keep.txt")]
    assert path.read_bytes() == b"stays the same"


def test_a_db_tool_gets_the_bytes_as_a_blob(server):
    c = session(server)
    data = bytes([0, 1, 2, 250, 255]) + b"binary"
    [up] = upload(server, [("file", ("blob.bin", data, "application/octet-stream"))], c.session).json()["uploads"]
    r = c.call("docs.store", {"name": "blob.bin", "file": up["handle"]})
    assert r["result"]["isError"] is False, r
    assert r["result"]["structuredContent"]["rows"] == [
        {"name": "blob.bin", "bytes": len(data), "hex": data.hex().upper(), "type": "blob"}]


def test_uploads_expire(start_server, tmp_path_factory):
    store = tmp_path_factory.mktemp("ttl") / "store"
    s = start_server(plugins=("wordcount",), config=f'[uploads]\ndir = "{store}"\nttl = "2s"\n')
    c = Mcp(s.url)
    c.initialize()
    [up] = upload(s, [("file", ("soon.txt", b"gone soon", "text/plain"))], c.session).json()["uploads"]
    assert up["expiresIn"] <= 2
    assert (store / c.session).exists()
    time.sleep(2.2)
    r = c.call("wordcount", {"files": [up["handle"]]})
    assert "no such upload (it expired" in r["error"]["message"]
    assert listed(s, c.session) == []
    # The sweep removes the files too.
    def swept():
        try:
            return not any(p.is_file() for p in (store / c.session).rglob("*"))
        except FileNotFoundError:
            # The sweep removed a directory while it was being listed.
            return False
    wait_for(swept, 10, "the expired upload to be swept")
