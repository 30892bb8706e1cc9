"""OpenTelemetry traces over OTLP/HTTP (protobuf): a span per call that
continues an incoming `traceparent`, a child span per stage that runs
something (auth check, mappers, handler), MCP semantic convention
attributes, and the same trace id in the answer as in the span."""

import http.server
import re
import secrets
import threading
import time

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from conftest import Mcp, free_port, wait_for

# The stages of echo (configured below) that run a component: its auth check, both mappers
# and the handler. Rate limit and validation are timed, not spanned.
STAGES = ["auth", "input_map", "handler", "output_map"]
API_KEY = "trace-key"
CONFIG = f"""
[plugins.api-key]
config = {{ keys = "tracer={API_KEY}" }}
[[tools]]
name = "echo"
auth = {{ plugin = "api-key" }}
mappers = {{ input = "normalize", output = "redact" }}
"""


class Receiver:
    """A tiny OTLP/HTTP collector: keeps every span it is sent, with its
    resource's attributes."""

    def __init__(self, delay: float = 0, idle_close: float = 0, hold: threading.Event | None = None):
        """`hold`: each export waits until the event is set (counted in
        `held` while it waits), so a test controls when the collector answers."""
        self.spans = []
        self.headers = []
        self.held = 0
        # How many spans each export request held, in order.
        self.batches = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # With `idle_close`, connections are kept alive (HTTP/1.1) and
            # closed by the collector after that long without a request.
            if idle_close:
                protocol_version = "HTTP/1.1"
                timeout = idle_close

            def do_POST(self):
                time.sleep(delay)  # a slow collector, when asked for
                if hold is not None:
                    with receiver.lock:
                        receiver.held += 1
                    # 60 s: against a hang only; the test sets the event.
                    hold.wait(60)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.headers.append(dict(self.headers))
                    receiver.batches.append(sum(len(ss.spans) for rs in request.resource_spans
                                                for ss in rs.scope_spans))
                    for rs in request.resource_spans:
                        resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                receiver.spans.append((resource, span))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def trace(self, trace_id: str):
        with self.lock:
            return [(r, s) for r, s in self.spans if s.trace_id.hex() == trace_id]

    def close(self):
        self.server.shutdown()


def attrs(span) -> dict:
    out = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = v.string_value if v.HasField("string_value") else v
    return out


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def server(start_server, receiver):
    return start_server(plugins=("echo", "everything", "api-key", "normalize", "redact"), config=CONFIG, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "hangar-test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    })


def call_spans(receiver, trace_id, name, children):
    """Waits until the trace has the call span and `children` stage spans under it."""
    def ready():
        spans = receiver.trace(trace_id)
        calls = [(r, s) for r, s in spans if s.name == name]
        if not calls:
            return None
        call = calls[0][1]
        kids = [s for _, s in spans if s.parent_span_id == call.span_id]
        return (calls[0], kids) if len(kids) >= children else None
    return wait_for(ready, 30, f"the spans of {name} in trace {trace_id}")


def test_a_call_continues_the_incoming_trace_with_a_span_per_stage(server, receiver):
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    c = Mcp(server.url)
    c.initialize()
    r = c.call("echo", {"text": " Traced "},
               headers={"traceparent": f"00-{trace_id}-{parent}-01", "x-api-key": API_KEY})
    assert "result" in r, r

    (resource, call), stages = call_spans(receiver, trace_id, "tools/call echo", len(STAGES))
    assert resource["service.name"] == "hangar-test"
    assert call.parent_span_id.hex() == parent
    a = attrs(call)
    assert a["mcp.method.name"] == "tools/call"
    assert a["gen_ai.tool.name"] == "echo"
    assert a["mcp.session.id"] == c.session
    assert "error.type" not in a
    assert all(s.trace_id.hex() == trace_id for s in stages)
    # Stages run one after another, inside the call.
    ordered = sorted(stages, key=lambda s: s.start_time_unix_nano)
    assert [s.name for s in ordered] == STAGES
    assert all(call.start_time_unix_nano <= s.start_time_unix_nano and
               s.end_time_unix_nano <= call.end_time_unix_nano for s in stages)


def test_a_tool_without_auth_or_mappers_has_only_its_handler_span(server, receiver):
    trace_id = secrets.token_hex(16)
    c = Mcp(server.url)
    c.initialize()
    r = c.call("test_simple_text", {}, headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    assert "result" in r, r
    (_, call), stages = call_spans(receiver, trace_id, "tools/call test_simple_text", 1)
    assert [s.name for s in stages] == ["handler"]
    assert attrs(stages[0])["hangar.stage"] == "handler"


def test_a_failed_call_says_its_error_type_and_stage(server, receiver):
    trace_id = secrets.token_hex(16)
    c = Mcp(server.url)
    c.initialize()
    r = c.call("echo", {"text": 42},
               headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01", "x-api-key": API_KEY})
    assert r["error"]["data"]["stage"] == "validate"
    (_, call), stages = call_spans(receiver, trace_id, "tools/call echo", 2)
    a = attrs(call)
    assert a["error.type"] == "invalid"
    assert a["hangar.stage"] == "validate"
    # The stages before the failing one ran; nothing after it did.
    assert sorted(s.name for s in stages) == ["auth", "input_map"]

    # A refused auth check fails in its own span.
    trace_id = secrets.token_hex(16)
    r = c.call("echo", {"text": "x"},
               headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01", "x-api-key": "wrong"})
    assert r["error"]["data"]["stage"] == "auth"
    (_, call), stages = call_spans(receiver, trace_id, "tools/call echo", 1)
    assert [s.name for s in stages] == ["auth"]
    assert attrs(stages[0])["error.type"] == "unauthorized"
    assert attrs(call)["hangar.stage"] == "auth"


def test_without_traceparent_an_mcp_errors_trace_id_is_the_exported_spans(server, receiver):
    """An MCP error names the trace id its call began with (cloned before the
    call runs); the call's span, having no parent, takes that id rather
    than one of its own, so the id in the error finds the exported trace."""
    c = Mcp(server.url)
    c.initialize()
    r = c.call("echo", {"text": 42}, headers={"x-api-key": API_KEY})
    assert r["error"]["data"]["stage"] == "validate", r
    trace_id = r["error"]["data"]["trace_id"]
    (_, call), _ = call_spans(receiver, trace_id, "tools/call echo", 2)
    assert call.parent_span_id == b"" and call.trace_id.hex() == trace_id
    assert attrs(call)["hangar.stage"] == "validate"


def test_without_traceparent_the_answer_names_the_spans_trace(server, receiver):
    r = httpx.post(server.url + "/tools/test_simple_text/call", json={})
    assert r.status_code == 200
    trace_id = r.json()["_meta"]["_trace_id"]
    (_, call), _ = call_spans(receiver, trace_id, "tools/call test_simple_text", 1)
    assert call.parent_span_id == b""
    assert server.log_text().count(f"trace_id={trace_id}") + \
        server.log_text().count(f'"trace_id":"{trace_id}"') >= 1


def test_stopping_sends_what_is_queued_and_a_full_queue_drops_and_says_so(start_server):
    """A queue of 3 spans (so batches of 3), a schedule that never fires and a
    collector that holds each export until the test lets it go: while the
    first batch is held the queue fills and later spans are dropped, and
    calls go on answering (they never wait for the exporter). Every span is
    either sent (the rest at SIGTERM, with the configured headers) or
    counted in the log as dropped."""
    gate = threading.Event()
    receiver = Receiver(hold=gate)
    calls = 8
    try:
        server = start_server(plugins=("everything",), env={
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{receiver.port}/v1/traces",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-key=s%20cret,x-tenant=7",
            "OTEL_BSP_SCHEDULE_DELAY": "600000",
            "OTEL_BSP_MAX_QUEUE_SIZE": "3",
        })
        ids = []

        def call():
            r = httpx.post(server.url + "/tools/test_simple_text/call", json={}, timeout=30)
            assert r.status_code == 200, r.text
            ids.append(r.json()["_meta"]["_trace_id"])

        # Two calls make four spans: a full batch of three goes to the
        # collector, which holds it.
        call()
        call()
        wait_for(lambda: receiver.held >= 1, 30, "the first batch at the collector")
        # The rest answer while the collector still holds it.
        for _ in range(calls - 2):
            call()
        assert receiver.spans == [] and not gate.is_set(), "the first batch was let go"
        gate.set()
        server.stop()
        assert server.proc.returncode == 0
        log = server.log_text()
        dropped = re.search(r'dropped_span_count"?[=:](\d+)', log)
        assert dropped, log
        assert "span queue is full" in log
        # Each call made two spans (its own and its handler's): none went missing.
        assert len(receiver.spans) + int(dropped.group(1)) == 2 * calls
        assert len(receiver.spans) >= 3
        assert {s.trace_id.hex() for _, s in receiver.spans} >= {ids[0]}
        assert receiver.headers[0]["x-collector-key"] == "s cret"
        assert receiver.headers[0]["x-tenant"] == "7"
    finally:
        gate.set()
        receiver.close()


def test_a_full_batch_goes_alone_and_the_rest_waits_for_the_schedule(start_server):
    """Batches of 3 spans, two calls of 2 spans each: the second call makes
    4 queued spans, which wakes the exporter. One full batch of 3 goes;
    the fourth span waits for the next batch, the schedule delay or
    shutdown, rather than going as a post of its own (under load that was
    every other post, each costing the exporter and the collector as much
    as a full one)."""
    receiver = Receiver()
    try:
        server = start_server(plugins=("everything",), env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "600000",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3",
        })
        ids = []
        for _ in range(2):
            r = httpx.post(server.url + "/tools/test_simple_text/call", json={})
            assert r.status_code == 200, r.text
            ids.append(r.json()["_meta"]["_trace_id"])
        wait_for(lambda: receiver.batches or None, 10, "the first batch")
        time.sleep(0.5)
        assert receiver.batches == [3]
        server.stop()
        assert server.proc.returncode == 0
        assert receiver.batches == [3, 1]
        assert len({s.span_id for _, s in receiver.spans}) == 4
        assert {s.trace_id.hex() for _, s in receiver.spans} == set(ids)
    finally:
        receiver.close()


def test_the_sampler_and_a_collector_that_is_down_leave_calls_alone(start_server):
    """`always_off` makes no span (the answer still has a trace id); a collector
    that refuses connections is logged once and calls go on answering."""
    receiver = Receiver()
    try:
        quiet = start_server(plugins=("everything",), env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_TRACES_SAMPLER": "always_off",
        })
        r = httpx.post(quiet.url + "/tools/test_simple_text/call", json={})
        assert r.status_code == 200
        assert len(r.json()["_meta"]["_trace_id"]) == 32
    finally:
        receiver.close()

    down = start_server(plugins=("everything",), env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    })
    for _ in range(3):
        for _ in range(5):
            assert httpx.post(down.url + "/tools/test_simple_text/call", json={}).status_code == 200
        wait_for(lambda: "failed" in down.log_text() or None, 10, "the export failure in the log")
    time.sleep(0.3)
    assert down.log_text().count("failed") == 1, down.log_text()
    # Nothing reached the receiver that was stopped before; the quiet server sampled nothing.
    assert receiver.spans == []


def test_a_collector_that_closes_idle_connections_loses_no_batch(start_server):
    """A collector that keeps connections alive and closes them when idle
    (as collectors behind load balancers do): the next batch goes out on a
    new connection, not the closed one, and nothing fails."""
    receiver = Receiver(idle_close=0.3)
    try:
        server = start_server(plugins=("everything",), env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        })
        for round in range(4):
            r = httpx.post(server.url + "/tools/test_simple_text/call", json={})
            assert r.status_code == 200
            trace_id = r.json()["_meta"]["_trace_id"]
            wait_for(lambda: receiver.trace(trace_id) or None, 10, f"the spans of call {round}")
            time.sleep(0.8)  # the collector closes the idle connection
        assert "failed" not in server.log_text(), server.log_text()
    finally:
        receiver.close()
