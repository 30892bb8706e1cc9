"""Outbound HTTP from guests: `wasi:http/outgoing-handler`, deny by default.

What these tests hold the host to (the `http-fetch` test guest makes one
request with `wstd` and answers `"<status> <body>"`, or a tool error
`request failed: <Debug of the error>`):

* **Grants.** `[plugins.X] grants = { http = [...] }` lists what a plugin may
  reach: a host (port 80 for http), `host:port`, or a `*.` wildcard. A request
  to anything else fails inside the guest (wasi:http `HTTP-request-denied`, a
  tool error with isError true), and the host log says
  `http: <host:port> not granted to plugin <name>`. A plugin with no grants
  reaches nothing.
* **Addresses are checked after resolution.** A granted *name* that resolves
  to loopback, private, link-local or metadata addresses is refused (log:
  `http: <host:port> resolves to <ip>, not granted to plugin <name>`) unless
  the grant names that address literally; `127.0.0.1:<port>` does.
  Link-local (169.254.169.254) and private (10.1.2.3) addresses are refused
  at once, before any connection, so the call answers well inside its
  deadline.
* **The call's deadline bounds the request**: a slow upstream ends in the
  usual `handler: deadline of N ms exceeded` error.
* **The trace goes upstream**: the request carries a `traceparent` whose
  trace id is the call's.

The upstream is a plain `http.server` in this process. As in
test_isolation.py, no test asserts a duration: short guest deadlines and
generous HTTP timeouts, so that a hang fails a test instead of passing it.
"""

import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit

import shutil
import ssl

import httpx
import pytest
import trustme

from conftest import Mcp, client, free_port, plugin_path, run_hangar, wait_for

PLUGIN = "http-fetch"
PLUGINS = ("echo", PLUGIN)
SLOW_SECONDS = 5

# --- the upstream -------------------------------------------------------------------------


class Upstream:
    """A local HTTP server that records every request it gets."""

    def __init__(self, tls=None):
        """`tls`: a server-side `ssl.SSLContext` to serve HTTPS with."""
        self.requests = []  # dicts: path, query, host, traceparent
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self):
                # The TLS handshake runs here, in the connection's own thread,
                # not in accept(): a slow or refused handshake (the client
                # that does not trust the CA) must not hold up other clients.
                self.refused = False
                if tls is not None:
                    try:
                        self.request.do_handshake()
                    except (ssl.SSLError, OSError):
                        self.refused = True  # a client that does not trust us
                super().setup()

            def handle(self):
                if not self.refused:
                    super().handle()

            def do_GET(self):
                parts = urlsplit(self.path)
                with upstream.lock:
                    upstream.requests.append({
                        "path": parts.path,
                        "query": parts.query,
                        "host": self.headers.get("host"),
                        "traceparent": self.headers.get("traceparent"),
                        "transfer-encoding": self.headers.get("transfer-encoding"),
                    })
                if parts.path == "/hello":
                    self.answer(200, b"hello from upstream")
                elif parts.path == "/big":
                    self.answer(200, b"b" * int(parse_qs(parts.query)["n"][0]))
                elif parts.path == "/redirect":
                    target = parse_qs(parts.query)["to"][0]
                    self.send_response(302)
                    self.send_header("location", target)
                    self.send_header("content-length", "0")
                    self.end_headers()
                elif parts.path == "/slow":
                    time.sleep(SLOW_SECONDS)
                    self.answer(200, b"slow answer")
                else:
                    self.answer(404, b"not found")

            def answer(self, status, body):
                try:
                    self.send_response(status)
                    self.send_header("content-type", "text/plain")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up (the /slow deadline test)

            def log_message(self, format, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True,
                                                do_handshake_on_connect=False)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def seen(self, **match):
        with self.lock:
            return [r for r in self.requests if all(r.get(k) == v for k, v in match.items())]


@pytest.fixture(scope="module")
def upstream():
    u = Upstream()
    u.thread.start()
    yield u
    u.httpd.shutdown()
    u.httpd.server_close()


# --- helpers ------------------------------------------------------------------------------


def fetch(server, url, headers=None, timeout=15):
    return client(server, timeout).call("fetch", {"url": url}, headers=headers)


def text_of(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]["content"][0]["text"]


def refused_text(r):
    """The tool error of a request the host refused."""
    assert "result" in r, r
    assert r["result"].get("isError") is True, r
    text = r["result"]["content"][0]["text"]
    assert text.startswith("request failed:"), text
    assert re.search(r"HttpRequestDenied|request denied", text, re.IGNORECASE), text
    return text


def log_line(server, *needles, timeout=5):
    """Waits for a line of the host log that contains every one of `needles`."""
    def found():
        for line in server.log_text().splitlines():
            if all(n in line for n in needles):
                return line
        return None

    return wait_for(found, timeout, f"a log line with {needles!r}:\n{server.log_text()}")


def grants_config(*entries, deadline="3s", limits=""):
    """`limits`: more keys for the fetch tool's limits table, e.g. `max_http_bytes = 1000`."""
    listed = ", ".join(f'"{e}"' for e in entries)
    more = f", {limits}" if limits else ""
    return (f'\n[plugins.{PLUGIN}]\ngrants = {{ http = [{listed}] }}\n'
            f'\n[[tools]]\nname = "fetch"\nlimits = {{ deadline = "{deadline}"{more} }}\n')


def echo_ok(server):
    assert text_of(client(server).call("echo", {"text": "still here"})) == "still here"


# --- servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def granted(start_server, upstream):
    """Grants the upstream's loopback address literally, and a wildcard name."""
    return start_server(plugins=PLUGINS,
                        config=grants_config(f"127.0.0.1:{upstream.port}", "*.example.org"))


@pytest.fixture(scope="module")
def ungranted(start_server):
    """The plugin has no grants section at all."""
    return start_server(plugins=PLUGINS,
                        config='\n[[tools]]\nname = "fetch"\nlimits = { deadline = "3s" }\n')


# --- 1. grants ----------------------------------------------------------------------------


def test_a_granted_host_and_port_is_reached(granted, upstream):
    r = fetch(granted, f"http://127.0.0.1:{upstream.port}/hello?case=granted")
    assert text_of(r).startswith("200 hello from upstream"), r
    assert upstream.seen(path="/hello", query="case=granted")


def test_a_granted_host_answers_its_own_status(granted, upstream):
    r = fetch(granted, f"http://127.0.0.1:{upstream.port}/missing")
    assert text_of(r).startswith("404 not found"), r


def test_a_get_whose_body_ends_after_the_request_went_out_is_answered(granted, upstream):
    # wstd hands the request to the host first and streams its body after;
    # a GET's body is empty and goes unsent. The guest's body here ends
    # 100 ms late: the host waits for that end, where it used to drop the
    # body at once and fail the guest's last write as "connection reset"
    # (which, on a busy machine, any GET could lose by a hair).
    url = f"http://127.0.0.1:{upstream.port}/hello?case=late-body"
    r = client(granted, 15).call("fetch", {"url": url, "slow_body_ms": 100})
    assert text_of(r).startswith("200 hello from upstream"), r
    [seen] = upstream.seen(path="/hello", query="case=late-body")
    assert seen["transfer-encoding"] is None, seen


def test_another_port_on_a_granted_host_is_refused(granted, upstream):
    other = free_port()
    while other == upstream.port:
        other = free_port()
    r = fetch(granted, f"http://127.0.0.1:{other}/hello")
    refused_text(r)
    log_line(granted, f"http: 127.0.0.1:{other} not granted to plugin {PLUGIN}")
    assert granted.alive()
    echo_ok(granted)


def test_a_plugin_without_grants_reaches_nothing(ungranted, upstream):
    r = fetch(ungranted, f"http://127.0.0.1:{upstream.port}/hello?case=ungranted")
    refused_text(r)
    log_line(ungranted, f"http: 127.0.0.1:{upstream.port} not granted to plugin {PLUGIN}")
    # Refused before any connection: the upstream never saw it.
    assert not upstream.seen(query="case=ungranted")
    echo_ok(ungranted)


# --- 2. addresses are checked after resolution --------------------------------------------


def test_a_granted_name_that_resolves_to_loopback_is_refused(start_server, upstream):
    server = start_server(plugins=PLUGINS, config=grants_config(f"localhost:{upstream.port}"))
    r = fetch(server, f"http://localhost:{upstream.port}/hello?case=localhost")
    refused_text(r)
    line = log_line(server, f"localhost:{upstream.port}", "resolves to", "not granted")
    assert f"not granted to plugin {PLUGIN}" in line, line
    assert not upstream.seen(query="case=localhost")
    echo_ok(server)


def test_the_metadata_address_is_refused_when_only_a_wildcard_is_granted(granted):
    # Answers at once (isError), not at the 3 s deadline: nothing was dialled.
    r = fetch(granted, "http://169.254.169.254/latest/meta-data")
    refused_text(r)
    log_line(granted, f"http: 169.254.169.254:80 not granted to plugin {PLUGIN}")


def test_a_private_address_is_refused_within_the_deadline(granted):
    # 10.1.2.3 would hang a connect; a refusal answers before the 3 s deadline
    # (a deadline error would be a JSON-RPC error, not an isError result).
    r = fetch(granted, "http://10.1.2.3/")
    refused_text(r)
    log_line(granted, f"http: 10.1.2.3:80 not granted to plugin {PLUGIN}")


# --- 3. the deadline bounds the request ---------------------------------------------------


def test_a_slow_upstream_meets_the_call_deadline(start_server, upstream):
    server = start_server(plugins=PLUGINS,
                          config=grants_config(f"127.0.0.1:{upstream.port}", deadline="1s"))
    r = fetch(server, f"http://127.0.0.1:{upstream.port}/slow")
    assert "error" in r, r
    assert r["error"]["code"] == -32000, r
    assert r["error"]["message"] == "handler: deadline of 1000 ms exceeded", r
    assert server.alive()
    echo_ok(server)


# --- 4. the trace goes upstream -----------------------------------------------------------


def test_the_request_carries_the_calls_trace_id(granted, upstream):
    trace_id = secrets.token_hex(16)
    traceparent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    r = fetch(granted, f"http://127.0.0.1:{upstream.port}/hello?case=trace",
              headers={"traceparent": traceparent})
    assert text_of(r).startswith("200 hello from upstream"), r
    got = upstream.seen(path="/hello", query="case=trace")
    assert got, upstream.requests
    sent = [g["traceparent"] for g in got]
    assert all(t and len(t.split("-")) == 4 for t in sent), sent
    assert [t.split("-")[1] for t in sent] == [trace_id] * len(sent), sent


def capability_lines(stdout, plugin):
    """The indented lines `hangar check` prints under `plugin`'s component."""
    lines = stdout.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("  ok ") and f"/{plugin}.wasm " in l)
    block = []
    for line in lines[at + 1:]:
        if not line.startswith("        "):
            break
        block.append(line.strip())
    return block


def test_check_prints_the_capability_imports_and_grants_and_rejects_a_bad_entry(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for name in ("http-fetch", "echo", "kv-counter"):
        shutil.copy(plugin_path(name), plugins / f"{name}.wasm")
    config = tmp_path / "hangar.toml"
    base = f'[server]\ncache_dir = "{tmp_path / "cache"}"\n'

    config.write_text(base)
    out = run_hangar("check", "--config", str(config), "--plugins", str(plugins))
    assert out.returncode == 0, out.stdout + out.stderr
    # http-fetch (wstd) imports outbound HTTP, credentials and config; without
    # grants it still loads, and check says its requests will be refused.
    http, credentials, config_line = capability_lines(out.stdout, "http-fetch")
    assert re.fullmatch(r"imports wasi:http/outgoing-handler@0\.2\.\d+; "
                        r"grants http: none \(its requests will be refused\)", http), out.stdout
    assert credentials == ("imports hangar:plugin/credentials@0.1.0; "
                           "grants credentials: none (its requests will be refused)"), out.stdout
    assert config_line == "imports hangar:plugin/config@0.1.0; config keys: none", out.stdout
    assert capability_lines(out.stdout, "kv-counter") == [
        "imports hangar:plugin/kv@0.1.0 (its own namespace; no grant needed)"], out.stdout
    assert capability_lines(out.stdout, "echo") == [], out.stdout

    config.write_text(base + '[credentials.github]\nkind = "static"\nvalue = "t0ken-value"\n'
                      '[plugins.http-fetch]\nconfig = { base_url = "https://api.example.org" }\n'
                      'grants = { http = ["api.example.org", "127.0.0.1:9000"], credentials = ["github"] }\n'
                      '[plugins.echo]\ngrants = { http = ["api.example.org"], credentials = ["github"] }\n')
    out = run_hangar("check", "--config", str(config), "--plugins", str(plugins))
    assert out.returncode == 0, out.stdout + out.stderr
    http, credentials, config_line = capability_lines(out.stdout, "http-fetch")
    assert http.endswith("; grants http: api.example.org, 127.0.0.1:9000"), out.stdout
    assert credentials == "imports hangar:plugin/credentials@0.1.0; grants credentials: github", out.stdout
    assert config_line == "imports hangar:plugin/config@0.1.0; config keys: base_url", out.stdout
    # Grants a component cannot use are shown as such; secrets never are.
    assert capability_lines(out.stdout, "echo") == [
        "grants http: api.example.org (the component imports no wasi:http/outgoing-handler)",
        "grants credentials: github (the component imports no hangar:plugin/credentials)",
    ], out.stdout
    assert "t0ken-value" not in out.stdout + out.stderr

    config.write_text(base + '[plugins.http-fetch]\ngrants = { http = ["https://api.example.org"] }\n')
    out = run_hangar("check", "--config", str(config), "--plugins", str(plugins))
    assert out.returncode != 0
    assert 'plugins.http-fetch.grants: grants.http: "https://api.example.org" is not a host' in out.stdout


# --- response cap, redirects, HTTPS ------------------------------------------------------


def test_a_response_over_max_http_bytes_fails_the_request(start_server, upstream):
    config = grants_config(f"127.0.0.1:{upstream.port}", limits="max_http_bytes = 1000")
    server = start_server(plugins=PLUGINS, config=config)
    base = f"http://127.0.0.1:{upstream.port}"
    assert text_of(fetch(server, f"{base}/big?n=500")) == "200 " + "b" * 500
    r = fetch(server, f"{base}/big?n=5000")
    assert r["result"]["isError"] is True, r
    text = r["result"]["content"][0]["text"]
    assert text.startswith("request failed:"), text
    assert "HTTP response body size exceeds limit: 5000 bytes" in text, text


def test_a_redirect_to_a_host_not_granted_is_refused_when_followed(start_server, upstream):
    server = start_server(plugins=PLUGINS, config=grants_config(f"127.0.0.1:{upstream.port}"))
    other = free_port()
    base = f"http://127.0.0.1:{upstream.port}"
    # Within the grants, a followed redirect is reached.
    r = client(server).call("fetch", {"url": f"{base}/redirect?to={quote(base + '/hello')}", "follow": True})
    assert text_of(r) == "200 hello from upstream"
    # To another port: the second request is refused like any other.
    target = f"http://127.0.0.1:{other}/hello"
    r = client(server).call("fetch", {"url": f"{base}/redirect?to={quote(target)}", "follow": True})
    refused_text(r)
    log_line(server, f"http: 127.0.0.1:{other} not granted to plugin {PLUGIN}")


@pytest.fixture(scope="module")
def tls_upstream(tmp_path_factory):
    """An HTTPS upstream whose certificate (for 127.0.0.1) a test CA signed."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    ca_file = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    u = Upstream(tls=context)
    u.thread.start()
    yield u, ca_file
    u.httpd.shutdown()
    u.httpd.server_close()


def test_https_is_verified_against_the_extra_ca(start_server, tls_upstream):
    upstream, ca_file = tls_upstream
    url = f"https://127.0.0.1:{upstream.port}/hello"
    grants = grants_config(f"127.0.0.1:{upstream.port}")
    trusted = start_server(plugins=PLUGINS, config=f'\n[http]\nextra_ca = "{ca_file}"\n' + grants)
    assert text_of(fetch(trusted, url)) == "200 hello from upstream"
    # Without the CA, the certificate is not trusted and the request fails.
    untrusted = start_server(plugins=PLUGINS, config=grants)
    r = fetch(untrusted, url)
    assert r["result"]["isError"] is True, r
    text = r["result"]["content"][0]["text"]
    assert text.startswith("request failed:"), text
    assert "tls" in text.lower() or "certificate" in text.lower(), text


def test_a_bad_extra_ca_stops_start_up_with_its_path(tmp_path):
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("not a certificate\n")
    config = tmp_path / "hangar.toml"
    config.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n[http]\nextra_ca = "{bad}"\n')
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    out = run_hangar("check", "--config", str(config), "--plugins", str(plugins))
    assert out.returncode != 0
    assert f"[http] extra_ca {bad}" in out.stdout + out.stderr, out.stdout + out.stderr
