"""An upstream MCP server that checks whose token each request carries, for
tests/test_token_exchange.py: the official Python SDK's FastMCP (mcp<2) over
Streamable HTTP at /mcp, under uvicorn, behind a check of the bearer token.

Every request to /mcp needs `Authorization: Bearer …`, one of:
- the service token (UPSTREAM_SERVICE_TOKEN): the server's own credential
  for its operator; good for initialize, the listings (tools/list,
  resources/list, prompts/list, …), notifications, ping, a GET stream and
  DELETE, and refused (403) for tools/call and anything else;
- a JWT signed by a key of UPSTREAM_JWKS, with `iss` = UPSTREAM_ISSUER,
  an `aud` among UPSTREAM_AUDIENCE (comma-separated), and not expired
  (UPSTREAM_LEEWAY seconds, default 1): a token issued for this server,
  good for everything;
- with UPSTREAM_ANY_BEARER=1 (and no JWKS needed), any other bearer: the
  server then takes whatever a caller's credential is, for everything.
Anything else is 401 (with a Bearer challenge), before FastMCP sees it.

Tools: token_subject (the call's token's sub, aud, iss, scope, exp, jti and
act, and the session id the call came with), bearer (the SHA-256 of the
call's raw bearer token and the session id), echo.

GET /stats (outside /mcp, no token): {"requests": {kind: n}, "methods":
{kind: {method: n}}, "calls": [{kind, tool, sub, session, bearer_sha256}],
"bearers": [the SHA-256 of every distinct bearer sent, refused ones too]};
kinds: service, exchanged (a JWT as above), bearer (UPSTREAM_ANY_BEARER),
refused, forbidden (the service token where it is not enough), duplicate
(more than one Authorization header: 400). A request's
method is its JSON-RPC method(s), or the HTTP method for GET and DELETE.

Port: UPSTREAM_PORT (default 0: any free port). Prints "ready PORT" on
stdout once it listens.
"""

import hashlib
import json
import os
import socket
from collections import defaultdict

import jwt
import uvicorn

from mcp.server.fastmcp import Context, FastMCP

SERVICE_TOKEN = os.environ["UPSTREAM_SERVICE_TOKEN"]
ANY_BEARER = os.environ.get("UPSTREAM_ANY_BEARER") == "1"
JWKS = os.environ.get("UPSTREAM_JWKS")
ISSUER = os.environ.get("UPSTREAM_ISSUER")
AUDIENCES = [a for a in os.environ.get("UPSTREAM_AUDIENCE", "").split(",") if a]
LEEWAY = float(os.environ.get("UPSTREAM_LEEWAY", "1"))
SERVICE_METHODS = {"initialize", "tools/list", "ping", "GET", "DELETE"}

keys = jwt.PyJWKClient(JWKS, cache_keys=True, lifespan=60) if JWKS else None
mcp = FastMCP("audience-upstream", log_level="WARNING")

STATS = {"requests": defaultdict(int), "methods": defaultdict(lambda: defaultdict(int)),
         "calls": [], "bearers": []}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def bearer_of(headers) -> str | None:
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def verified(token: str) -> dict:
    """The claims of a token issued for this server; raises otherwise."""
    if keys is None:
        raise jwt.InvalidTokenError("no JWKS configured")
    key = keys.get_signing_key_from_jwt(token)
    return jwt.decode(token, key.key, algorithms=["RS256", "ES256", "EdDSA"], issuer=ISSUER,
                      audience=AUDIENCES, leeway=LEEWAY,
                      options={"require": ["exp", "iss", "aud", "sub"]})


def kind_of(token: str | None) -> tuple[str, dict | None]:
    if token is None:
        return "refused", None
    if token == SERVICE_TOKEN:
        return "service", None
    if keys is not None:
        try:
            return "exchanged", verified(token)
        except (jwt.PyJWTError, jwt.PyJWKClientError):
            pass
    return ("bearer", None) if ANY_BEARER else ("refused", None)


def call_record(ctx: Context, tool: str) -> tuple[str, str | None, dict]:
    request = ctx.request_context.request
    token = bearer_of(request.headers)
    kind, claims = kind_of(token)
    session = request.headers.get("mcp-session-id")
    STATS["calls"].append({"kind": kind, "tool": tool, "sub": (claims or {}).get("sub"),
                           "session": session, "bearer_sha256": sha256(token) if token else None})
    return token, session, claims or {}


@mcp.tool()
def token_subject(ctx: Context) -> dict:
    """Who the token this call came with stands for, and the call's session."""
    _, session, claims = call_record(ctx, "token_subject")
    return {"sub": claims.get("sub"), "aud": claims.get("aud"), "iss": claims.get("iss"),
            "scope": claims.get("scope"), "exp": claims.get("exp"), "jti": claims.get("jti"),
            "act": claims.get("act"), "session": session}


@mcp.tool()
def bearer(ctx: Context) -> dict:
    """The SHA-256 of the bearer token this call came with, and the call's session."""
    token, session, _ = call_record(ctx, "bearer")
    return {"sha256": sha256(token) if token else None, "session": session}


@mcp.tool()
def echo(text: str) -> str:
    """Answers with its text, between brackets."""
    return f"[{text}]"


async def respond(send, status, body, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def methods_of(body: bytes) -> list[str]:
    try:
        message = json.loads(body)
    except ValueError:
        return ["(not JSON)"]
    messages = message if isinstance(message, list) else [message]
    return [m.get("method", "(response)") if isinstance(m, dict) else "(not an object)"
            for m in messages] or ["(empty batch)"]


def guarded(app):
    """FastMCP's app behind the bearer check, with GET /stats beside it."""
    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] == "/stats":
            return await respond(send, 200, STATS)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        # The whole body, to read its method(s); FastMCP is given it again.
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        methods = methods_of(body) if scope["method"] == "POST" else [scope["method"]]
        token = bearer_of(headers)
        if token and sha256(token) not in STATS["bearers"]:
            STATS["bearers"].append(sha256(token))
        kind, _ = kind_of(token)
        if sum(k.lower() == b"authorization" for k, _ in scope["headers"]) > 1:
            kind = "duplicate"
        elif kind == "service" and not all(m in SERVICE_METHODS or m.startswith("notifications/")
                                           or m.endswith("/list") for m in methods):
            kind = "forbidden"
        STATS["requests"][kind] += 1
        for m in methods:
            STATS["methods"][kind][m] += 1
        if kind == "refused":
            return await respond(send, 401, {"error": "invalid_token"},
                                 [(b"www-authenticate", b'Bearer error="invalid_token"')])
        if kind == "duplicate":
            return await respond(send, 400, {"error": "more than one Authorization header"})
        if kind == "forbidden":
            return await respond(send, 403, {"error": "the service token does not call tools"})
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await app(scope, replay, send)
    return wrapped


if __name__ == "__main__":
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("UPSTREAM_PORT", "0"))))
    sock.listen(128)
    print(f"ready {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(guarded(mcp.streamable_http_app()), log_level="warning",
                                  lifespan="on")).run(sockets=[sock])
