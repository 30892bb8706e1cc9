"""Artifacts: what a tool leaves in its /artifacts folder becomes an
artifact://<session>/<id>/<name> resource of the session: listed by
resources/list, read back byte for byte by resources/read and by its signed
download URL, which fails once expired or altered; quotas refuse clearly
(a file past max_file_bytes fails while the tool writes it; the file count
and session quotas are checked when the call ends)."""

import base64
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from conftest import Mcp

ROWS = [{"sku": "A-1", "name": "Tent, 2 people", "qty": 3}, {"sku": "B-2", "name": 'The "best" lamp', "qty": None}]
# Columns: every key of the rows, sorted.
CSV = 'name,qty,sku\r\n"Tent, 2 people",3,A-1\r\n"The ""best"" lamp",,B-2\r\n'


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    store = tmp_path_factory.mktemp("artifacts") / "store"
    config = f'''
[artifacts]
dir = "{store}"
url_ttl = "3s"
max_file_bytes = 2000
max_session_files = 4
'''
    s = start_server(plugins=("csv-report", "wordcount"), config=config)
    s.store = store
    return s


def session(server):
    c = Mcp(server.url)
    c.initialize()
    return c


def report(c, **args):
    r = c.call("csv_report", {"rows": ROWS, **args})
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]


def resources(c):
    return c.request("resources/list")["result"]["resources"]


def test_an_artifact_is_a_resource_of_its_session_read_back_byte_for_byte(server):
    a, b = session(server), session(server)
    result = report(a)
    [link] = [block for block in result["content"] if block["type"] == "resource_link"]
    uri = link["uri"]
    assert uri.startswith(f"artifact://{a.session}/") and uri.endswith("/report.csv")
    assert link["name"] == "report.csv" and link["mimeType"] == "text/csv"
    [meta] = result["_meta"]["hangar/artifacts"]
    assert meta["uri"] == uri and meta["size"] == len(CSV.encode())
    # Listed for its session only.
    assert uri in {r["uri"] for r in resources(a)}
    assert uri not in {r["uri"] for r in resources(b)}
    listed = [r for r in resources(a) if r["uri"] == uri][0]
    assert listed["mimeType"] == "text/csv" and listed["size"] == len(CSV.encode())
    # Read back: the same bytes, as text.
    [item] = a.request("resources/read", {"uri": uri})["result"]["contents"]
    assert item["text"].encode() == CSV.encode() and item["mimeType"] == "text/csv"
    # Another session cannot read it.
    assert b.request("resources/read", {"uri": uri})["error"]["code"] == -32002
    # The download URL serves the same bytes to anyone who holds it.
    r = httpx.get(meta["url"])
    assert r.status_code == 200 and r.content == CSV.encode()
    assert r.headers["content-type"] == "text/csv"
    assert r.headers["content-disposition"] == "attachment; filename=\"report.csv\"; filename*=UTF-8''report.csv"
    assert r.headers["x-content-type-options"] == "nosniff"


def test_a_download_is_a_file_to_save_never_a_page(server):
    """An artifact a tool names as HTML is still served as an attachment the
    browser may not sniff or render as a page of this origin; its name, with
    quotes and non-ASCII letters, cannot break out of the header."""
    c = session(server)
    [meta] = report(c, filename='page "ü";x.html')["_meta"]["hangar/artifacts"]
    r = httpx.get(meta["url"])
    assert r.status_code == 200 and r.content == CSV.encode()
    assert r.headers["content-type"] == "text/html"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"page_____x.html\"; filename*=UTF-8''page%20%22%C3%BC%22%3Bx.html")
    assert "sandbox" in r.headers["content-security-policy"]


def test_a_binary_artifact_reads_back_as_a_blob(server):
    c = session(server)
    result = report(c, filename="report.bin")
    [meta] = result["_meta"]["hangar/artifacts"]
    assert meta["mimeType"] == "application/octet-stream"
    [item] = c.request("resources/read", {"uri": meta["uri"]})["result"]["contents"]
    assert "text" not in item
    assert base64.b64decode(item["blob"]) == CSV.encode()
    assert httpx.get(meta["url"]).content == CSV.encode()


def test_the_download_url_fails_when_altered_or_expired(server):
    c = session(server)
    [meta] = report(c)["_meta"]["hangar/artifacts"]
    url = urlsplit(meta["url"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    base = f"{url.scheme}://{url.netloc}{url.path}"
    assert httpx.get(meta["url"]).status_code == 200
    # A changed signature, a later expiry, another file: all refused.
    flipped = query["sig"][:-1] + ("0" if query["sig"][-1] != "0" else "1")
    r = httpx.get(base + "?" + urlencode({**query, "sig": flipped}))
    assert r.status_code == 403 and "signature" in r.json()["error"]
    r = httpx.get(base + "?" + urlencode({**query, "expires": int(query["expires"]) + 3600}))
    assert r.status_code == 403 and "signature" in r.json()["error"]
    other = base.rsplit("/", 1)[0] + "/other.csv"
    assert httpx.get(other + "?" + url.query).status_code == 403
    assert httpx.get(base).status_code == 403
    # url_ttl is 3 s: then the same URL is refused.
    time.sleep(max(0, int(query["expires"]) - time.time()) + 1.2)
    r = httpx.get(meta["url"])
    assert r.status_code == 403 and "expired" in r.json()["error"]
    # Reading the resource still works, and a new call gives a new URL.
    assert c.request("resources/read", {"uri": meta["uri"]})["result"]["contents"]


def test_artifact_quotas_give_clear_errors_and_keep_nothing(server):
    c = session(server)
    before = resources(c)
    big = [{"text": "x" * 100} for _ in range(30)]
    r = c.call("csv_report", {"rows": big, "filename": "big.csv"})
    # A file past max_file_bytes fails while it is written: the tool sees
    # the write fail and reports it; the host log names the quota.
    assert r["result"]["isError"] is True, r
    assert "cannot write /artifacts/big.csv" in r["result"]["content"][0]["text"], r
    assert "artifacts: a write of plugin csv-report refused: a file would pass 2000 bytes" in server.log_text()
    assert resources(c) == before
    session_dir = server.store / c.session
    assert not session_dir.exists() or not any(p.is_file() for p in session_dir.rglob("*"))
    # Four files at most per session.
    for i in range(4):
        report(c, filename=f"r{i}.csv")
    r = c.call("csv_report", {"rows": ROWS, "filename": "r5.csv"})
    assert "max_session_files" in r["error"]["message"]
    assert len([x for x in resources(c) if x["uri"].startswith("artifact://")]) == 4


def test_a_tool_without_produces_artifacts_gets_no_folder(server):
    c = session(server)
    r = httpx.post(server.url + "/uploads", files=[("file", ("t.txt", b"a b", "text/plain"))],
                   headers={"mcp-session-id": c.session})
    [up] = r.json()["uploads"]
    sc = c.call("wordcount", {"files": [up["handle"]]})["result"]["structuredContent"]
    assert [v["path"] for v in sc["visible"]] == ["/uploads"]
