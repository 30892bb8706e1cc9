"""Requested grants travel with a component as an OCI annotation (issue #42, item 6).

`hangar push FILE oci://… --requests asks.toml` writes what the component asks
for (a `grants` table: `http`, `credentials`) into the manifest annotation
`dev.hangar.requests`. `hangar check` shows it beside what hangar.toml grants;
nothing is granted from it: the `http-fetch` test guest asking for the
upstream's address still has its request refused until hangar.toml grants it.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from conftest import client, plugin_path, wait_for
from test_oci_sources import (  # noqa: F401 (fixtures)
    hangar, put_artifact, registries, registry, servers, source, tools)


@pytest.fixture
def upstream():
    """A local HTTP server answering `hello` to every GET."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def push_with_requests(tmp_path, registry, name, ref, requests_toml) -> str:
    asks = tmp_path / "asks.toml"
    asks.write_text(requests_toml)
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(registry))
    out = hangar("push", plugin_path(name), f"oci://{registry.host}/{ref}", "--config", cfg,
                 "--requests", asks)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def manifest(registry, repo, digest) -> dict:
    r = httpx.get(f"http://{registry.host}/v2/{repo}/manifests/{digest}",
                  headers={"accept": "application/vnd.oci.image.manifest.v1+json"})
    assert r.status_code == 200, r.text
    return r.json()


def fetch(server, url):
    return client(server, 30).call("fetch", {"url": url})


FETCH_TOOL = '\n[[tools]]\nname = "fetch"\nlimits = { deadline = "5s" }\n'


def check(s) -> str:
    out = hangar("check", "--config", s.config_path, "--plugins", s.plugins_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_requests_are_shown_and_grant_nothing(tmp_path, registry, servers, upstream):
    digest = push_with_requests(tmp_path, registry, "http-fetch", "tools/fetch:1.0",
                                f'http = ["{upstream}"]\ncredentials = ["github"]\n')
    # In the manifest, as JSON in the grants vocabulary.
    m = manifest(registry, "tools/fetch", digest)
    assert json.loads(m["annotations"]["dev.hangar.requests"]) == \
        {"http": [upstream], "credentials": ["github"]}
    ref = f"oci://{registry.host}/tools/fetch:1.0"

    # Asked for, not granted: refused at call time.
    s = servers(tmp_path / "ungranted", [],
                config=registries(registry) + source("fetcher", ref, digest) + FETCH_TOOL)
    assert "fetch" in tools(s)
    r = fetch(s, f"http://{upstream}/hello")
    assert r["result"]["isError"] is True, r
    assert "denied" in r["result"]["content"][0]["text"].lower(), r
    wait_for(lambda: f"http: {upstream} not granted to plugin fetcher" in s.log_text(), 10,
             "the refusal in the log")
    out = check(s)
    assert f"requests http {upstream}, credentials github\n" in out
    assert f"granted: none; not granted: http {upstream}, credentials github" in out

    # Granted in hangar.toml: the request goes out; the credential is still not granted.
    granted = registries(registry) + source("fetcher", ref, digest) \
        + f'grants = {{ http = ["{upstream}", "api.example.org"] }}\n' + FETCH_TOOL
    s2 = servers(tmp_path / "granted", [], config=granted)
    r = fetch(s2, f"http://{upstream}/hello")
    assert r["result"]["isError"] is False, r
    assert r["result"]["content"][0]["text"] == "200 hello"
    out = check(s2)
    assert f"granted: http {upstream}; not granted: credentials github" in out
    assert "granted beyond its requests: http api.example.org" in out

    # The annotation is kept with the cached manifest: offline, check still shows it.
    registry.stop()
    out = hangar("check", "--config", s2.config_path, "--plugins", s2.plugins_dir)
    assert "from   cache" in out.stdout
    assert f"granted: http {upstream}; not granted: credentials github" in out.stdout


def test_a_bad_requests_file_is_refused_before_pushing(tmp_path, registry):
    cfg = tmp_path / "push.toml"
    cfg.write_text(registries(registry))
    asks = tmp_path / "asks.toml"
    target = f"oci://{registry.host}/tools/echo:bad"
    for text, needle in [
        ('kv = ["cache"]\n', "unknown field `kv`"),
        ('http = ["https://api.example.com/v1"]\n',
         '"https://api.example.com/v1" is not a host, host:port or *.domain'),
        ('http = "api.example.com"\n', "not a grants table"),
    ]:
        asks.write_text(text)
        out = hangar("push", plugin_path("echo"), target, "--config", cfg, "--requests", asks)
        assert out.returncode == 1, out.stdout
        assert f"--requests {asks}" in out.stderr and needle in out.stderr, out.stderr
    out = hangar("push", plugin_path("echo"), target, "--config", cfg,
                 "--requests", tmp_path / "missing.toml")
    assert out.returncode == 1 and "missing.toml" in out.stderr
    # Nothing was pushed.
    r = httpx.get(f"http://{registry.host}/v2/tools/echo/tags/list")
    assert r.status_code == 404 or not r.json().get("tags"), r.text


def test_an_unreadable_annotation_is_reported_not_granted(tmp_path, registry, servers):
    """A manifest whose dev.hangar.requests is not a grants object: check says so; it still serves."""
    wasm = plugin_path("echo").read_bytes()
    base = f"http://{registry.host}/v2/tools/odd"
    digest = put_artifact(registry, "tools/odd", "plain", wasm, "application/wasm",
                          "application/vnd.wasm.config.v0+json")
    m = manifest(registry, "tools/odd", digest)
    m["annotations"] = {"dev.hangar.requests": '{"files": ["/etc"]}'}
    body = json.dumps(m).encode()
    r = httpx.put(f"{base}/manifests/odd", content=body,
                  headers={"content-type": "application/vnd.oci.image.manifest.v1+json"})
    assert r.status_code == 201, r.text
    s = servers(tmp_path / "srv", [],
                config=registries(registry) + source("remote", f"oci://{registry.host}/tools/odd:odd"))
    assert tools(s) == ["echo"]
    out = check(s)
    assert "requests unknown: the dev.hangar.requests annotation is not a grants object" in out
    assert "unknown field `files`" in out
