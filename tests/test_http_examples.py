"""The HTTP examples in plugins/ — `weather` (Rust, `wstd`), `js-http`
(JavaScript, `fetch`) and `py-http` (Python, componentize-py's wasi:http
bindings in the `tool-http` world) — call a JSON API whose base URL is their
`base_url` config: against a local JSON API this test starts, under grants
they answer its data; a status the API answers is a tool error that names
it; and without grants (as the shipped hangar.toml loads them) their
requests are refused by the host."""

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from conftest import Mcp, plugin_path, run_hangar

PLUGINS = ("weather", "js-http", "py-http")
FORECASTS = {
    "Lisbon": {"city": "Lisbon", "summary": "sunny", "temperature_c": 24},
    "São Paulo": {"city": "São Paulo", "summary": "rain", "temperature_c": 18},
}
ITEMS = {"1": {"id": 1, "name": "Rain jacket", "tags": ["outerwear", "waterproof"]}}


class JsonApi:
    """A local JSON API that records the requests it gets."""

    def __init__(self):
        self.requests = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                api.requests.append({"path": parts.path, "query": parts.query,
                                     "accept": self.headers.get("accept")})
                query = parse_qs(parts.query)
                if parts.path == "/v1/forecast":
                    city = query.get("city", [""])[0]
                    if city in FORECASTS:
                        return self.answer(200, FORECASTS[city])
                    return self.answer(404, {"error": f"unknown city {city}"})
                if parts.path.startswith("/items/") and parts.path[len("/items/"):] in ITEMS:
                    return self.answer(200, ITEMS[parts.path[len("/items/"):]])
                if parts.path == "/broken":
                    return self.answer(500, {"error": "upstream exploded"})
                if parts.path == "/many":
                    n = int(query.get("n", ["0"])[0])
                    return self.answer(200, {"items": [{"id": i, "name": f"item {i}"} for i in range(n)]})
                self.answer(404, {"error": "not found"})

            def do_POST(self):
                parts = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                api.requests.append({"path": parts.path, "query": parts.query, "method": "POST",
                                     "accept": self.headers.get("accept"),
                                     "content_type": self.headers.get("content-type"), "body": body})
                if parts.path == "/echo":
                    return self.answer(201, {"received": json.loads(body)})
                self.answer(404, {"error": "not found"})

            def answer(self, status, value):
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass

        self.httpd = RoomyServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def seen(self, path):
        return [r for r in self.requests if r["path"] == path]


class RoomyServer(ThreadingHTTPServer):
    # The listen backlog is 5 by default: on a loaded machine a guest's
    # connection that finds it full may be reset rather than served.
    request_queue_size = 64


@pytest.fixture(scope="module")
def api():
    a = JsonApi()
    yield a
    a.httpd.shutdown()
    a.httpd.server_close()


def config(api, grants=True):
    grant = f'grants = {{ http = ["127.0.0.1:{api.port}"] }}\n' if grants else ""
    return (f'\n[plugins.weather]\nconfig = {{ base_url = "{api.base}/v1" }}\n{grant}'
            f'\n[plugins.js-http]\nconfig = {{ base_url = "{api.base}" }}\n{grant}'
            f'\n[plugins.py-http]\nconfig = {{ base_url = "{api.base}" }}\n{grant}')


@pytest.fixture(scope="module")
def granted(start_server, api):
    return start_server(plugins=PLUGINS, config=config(api))


@pytest.fixture(scope="module")
def ungranted(start_server, api):
    return start_server(plugins=PLUGINS, config=config(api, grants=False))


def client(server):
    c = Mcp(server.url)
    c.http.timeout = httpx.Timeout(30)
    return c


def ok(r):
    assert r.get("result", {}).get("isError") is False, r
    return r["result"]


def tool_error(r):
    assert r.get("result", {}).get("isError") is True, r
    return r["result"]["content"][0]["text"]


def test_all_three_tools_are_listed(granted):
    tools = client(granted).request("tools/list")["result"]["tools"]
    assert sorted(t["name"] for t in tools) == ["js.fetch_json", "py.fetch_json", "weather.forecast"]


def test_weather_answers_the_apis_forecast(granted, api):
    result = ok(client(granted).call("weather.forecast", {"city": "Lisbon"}))
    assert result["structuredContent"] == FORECASTS["Lisbon"]
    assert result["content"][0]["text"] == "Forecast for Lisbon: sunny, 24 °C"
    # The city is sent percent-encoded, and JSON is asked for.
    result = ok(client(granted).call("weather.forecast", {"city": "São Paulo"}))
    assert result["structuredContent"] == FORECASTS["São Paulo"]
    sent = api.seen("/v1/forecast")
    assert sent[-1]["query"] == "city=S%C3%A3o%20Paulo", sent
    assert sent[-1]["accept"] == "application/json"


def test_weather_reports_the_apis_status_as_a_tool_error(granted):
    text = tool_error(client(granted).call("weather.forecast", {"city": "Atlantis"}))
    assert text.startswith("weather: the API answered 404"), text
    assert "unknown city Atlantis" in text


def test_js_http_answers_the_apis_json(granted, api):
    result = ok(client(granted).call("js.fetch_json", {"path": "/items/1"}))
    assert json.loads(result["content"][0]["text"]) == ITEMS["1"]
    assert api.seen("/items/1")


def test_js_http_reports_the_apis_status_as_a_tool_error(granted):
    text = tool_error(client(granted).call("js.fetch_json", {"path": "/broken"}))
    assert text.startswith("js-http: the API answered 500"), text


def test_py_http_answers_the_apis_json(granted, api):
    before = len(api.seen("/items/1"))
    result = ok(client(granted).call("py.fetch_json", {"path": "/items/1"}))
    assert json.loads(result["content"][0]["text"]) == ITEMS["1"]
    assert result["structuredContent"] == ITEMS["1"]
    sent = api.seen("/items/1")
    assert len(sent) == before + 1, sent
    assert sent[-1]["accept"] == "application/json"
    assert "fetched /items/1: 200" in granted.log_text()


def test_py_http_reads_a_body_of_many_chunks(granted, api):
    # About 190 KB: more than one read of the response stream.
    result = ok(client(granted).call("py.fetch_json", {"path": "/many?n=6000"}))
    items = result["structuredContent"]["items"]
    assert len(items) == 6000
    assert items[5999] == {"id": 5999, "name": "item 5999"}


def test_py_http_posts_json(granted, api):
    body = {"name": "Umbrella", "tags": ["rain"], "note": "ß" * 5000}  # a body of several writes
    result = ok(client(granted).call("py.fetch_json", {"path": "/echo", "body": body}))
    assert result["structuredContent"] == {"received": body}
    sent = api.seen("/echo")[-1]
    assert sent["method"] == "POST"
    assert sent["content_type"] == "application/json"
    assert json.loads(sent["body"]) == body


def test_py_http_reports_the_apis_status_as_a_tool_error(granted):
    text = tool_error(client(granted).call("py.fetch_json", {"path": "/broken"}))
    assert text.startswith("py-http: the API answered 500"), text
    assert "upstream exploded" in text


def test_without_grants_all_are_refused(ungranted, api):
    before = len(api.requests)
    text = tool_error(client(ungranted).call("weather.forecast", {"city": "Lisbon"}))
    assert text.startswith("weather: request failed:"), text
    assert "HttpRequestDenied" in text, text
    text = tool_error(client(ungranted).call("js.fetch_json", {"path": "/items/1"}))
    assert text.startswith("js-http: request failed:"), text
    assert "NetworkError" in text, text  # fetch does not pass the wasi:http error code on
    text = tool_error(client(ungranted).call("py.fetch_json", {"path": "/items/1"}))
    assert text == "py-http: request failed: HttpRequestDenied", text
    log = ungranted.log_text()
    for plugin in PLUGINS:
        assert f"http: 127.0.0.1:{api.port} not granted to plugin {plugin}" in log, log
    # Refused before any connection: the API saw nothing.
    assert len(api.requests) == before


def test_check_shows_all_import_wasi_http_and_have_no_grants(tmp_path, shared_cache):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for name in PLUGINS:
        shutil.copy(plugin_path(name), plugins / f"{name}.wasm")
    config = tmp_path / "hangar.toml"
    # The run's compiled components: the servers above compiled these already.
    config.write_text(f'[server]\ncache_dir = "{shared_cache}"\n')
    out = run_hangar("check", "--config", str(config), "--plugins", str(plugins))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for name in PLUGINS:
        at = next(i for i, l in enumerate(lines) if f"{name}.wasm" in l)
        assert "wasi:http/outgoing-handler" in lines[at + 1], out.stdout
        assert "grants http: none (its requests will be refused)" in lines[at + 1], out.stdout
    # The Python component imports every interface of its world (a Rust one
    # only what it uses); it loads as a tool.
    at = next(i for i, l in enumerate(lines) if "py-http.wasm" in l)
    assert "tool world" in lines[at], out.stdout
    assert lines[at + 1:at + 5] == [
        "        imports wasi:http/outgoing-handler@0.2.12; grants http: none (its requests will be refused)",
        "        imports hangar:plugin/credentials@0.1.0; grants credentials: none (its requests will be refused)",
        "        imports hangar:plugin/kv@0.1.0 (its own namespace; no grant needed)",
        "        imports hangar:plugin/config@0.1.0; config keys: none",
    ], out.stdout
    assert "  tool  py.fetch_json" in out.stdout
