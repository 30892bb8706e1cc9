"""A small synchronous HTTP client over `wasi:http/outgoing-handler`, for a
Hangar tool built with componentize-py against the `tool-http` world.

    response = http_client.get("https://api.example.org/items/1", {"accept": "application/json"})
    response = http_client.post(url, b'{"a": 1}', {"content-type": "application/json"})
    response.status, response.headers, response.body   # int, list of (name, bytes), bytes

Each call blocks until the whole response body has arrived (`pollable.block()`
lets the host run the request meanwhile). A request the host refuses (a host
not granted to the plugin), a connection that fails, or a response over the
call's byte budget raises `HttpError`, whose `code` names the `wasi:http`
error code (e.g. `HttpRequestDenied`).
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler, wasi_http_types as http
from wit_world.imports.streams import StreamError_Closed

READ_SIZE = 64 * 1024
WRITE_SIZE = 4096  # the most `blocking-write-and-flush` takes at once


class HttpError(Exception):
    """A request that got no response: `code` is the wasi:http error code's
    name (`HttpRequestDenied`, `ConnectionRefused`, …), `detail` its payload."""

    def __init__(self, code: str, detail=None):
        self.code, self.detail = code, detail
        super().__init__(code if detail is None else f"{code}: {detail}")


@dataclass
class Response:
    status: int
    headers: list  # of (name, value bytes)
    body: bytes

    def header(self, name: str):
        """The first value of header `name` as text, or None."""
        name = name.lower()
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == name), None)


def get(url: str, headers: dict | None = None) -> Response:
    return request("GET", url, headers)


def post(url: str, body: bytes, headers: dict | None = None) -> Response:
    return request("POST", url, headers, body)


def request(method: str, url: str, headers: dict | None = None, body: bytes | None = None) -> Response:
    """Sends one request and answers the whole response."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    headers = dict(headers or {})
    if body is not None and not any(k.lower() == "content-length" for k in headers):
        headers["content-length"] = str(len(body))  # a sized body, not a chunked one
    fields = http.Fields.from_list([(k, v.encode()) for k, v in headers.items()])
    req = http.OutgoingRequest(fields)
    req.set_method(_method(method))
    req.set_scheme(http.Scheme_Https() if parts.scheme == "https" else http.Scheme_Http())
    req.set_authority(parts.netloc)
    req.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    # A body is taken before `handle` consumes the request and written after
    # it, while the host sends; a request without one never takes it.
    out_body = req.body() if body is not None else None
    try:
        future = outgoing_handler.handle(req, None)
    except Err as e:
        if out_body is not None:
            out_body.__exit__(None, None, None)
        raise _error(e.value) from None
    with future:
        if out_body is not None:
            _write_body(out_body, body)
        while (answer := future.get()) is None:
            with future.subscribe() as ready:
                ready.block()
    if isinstance(answer, Err):  # the future's value was already taken (cannot happen here)
        raise HttpError("InternalError", "response taken twice")
    inner = answer.value
    if isinstance(inner, Err):
        raise _error(inner.value)
    with inner.value as response:
        status, header_list = response.status(), response.headers().entries()
        return Response(status, header_list, _read_body(response.consume()))


def _method(name: str):
    known = {"GET": http.Method_Get, "HEAD": http.Method_Head, "POST": http.Method_Post,
             "PUT": http.Method_Put, "DELETE": http.Method_Delete, "PATCH": http.Method_Patch,
             "OPTIONS": http.Method_Options}
    return known[name.upper()]() if name.upper() in known else http.Method_Other(name)


def _write_body(out_body, data: bytes):
    with out_body.write() as stream:
        for at in range(0, len(data), WRITE_SIZE):
            try:
                stream.blocking_write_and_flush(data[at:at + WRITE_SIZE])
            except Err as e:
                raise _stream_error(e.value) from None
    http.OutgoingBody.finish(out_body, None)


def _read_body(body) -> bytes:
    chunks = []
    with body:
        with body.stream() as stream:
            while True:
                try:
                    chunk = stream.read(READ_SIZE)
                except Err as e:
                    if isinstance(e.value, StreamError_Closed):
                        break
                    raise _stream_error(e.value) from None
                if chunk:
                    chunks.append(chunk)
                else:
                    with stream.subscribe() as ready:
                        ready.block()
    return b"".join(chunks)


def _error(code) -> HttpError:
    name = type(code).__name__.removeprefix("ErrorCode_")
    return HttpError(name, getattr(code, "value", None))


def _stream_error(err) -> HttpError:
    """A failed read or write: the wasi:http error code behind it, when there is one."""
    code = http.http_error_code(err.value) if hasattr(err, "value") else None
    return _error(code) if code is not None else HttpError("StreamError", type(err).__name__)
