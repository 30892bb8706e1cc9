"""An OAuth 2.0 Token Exchange (RFC 8693) authorization server for
tests/test_token_exchange.py: it takes a caller's access token (issued by
another authorization server, oidc-provider in the tests) and answers a JWT
of its own for an upstream, acting for that caller.

POST /token (application/x-www-form-urlencoded, the client authenticated by
HTTP Basic only, RFC 6749 §2.3.1):
  grant_type=urn:ietf:params:oauth:grant-type:token-exchange
  subject_token=<an access token of EXCHANGE_SUBJECT_ISSUER>
  subject_token_type=urn:ietf:params:oauth:token-type:access_token
  requested_token_type (optional; access_token or jwt)
  audience (and/or resource; at least one, each one allowed)
  scope (optional; space-separated)
The subject token is verified: its signature against the issuer's JWKS, its
`iss`, `exp` (and `aud` when EXCHANGE_SUBJECT_AUDIENCE is set). Refusals
(RFC 6749 §5.2, RFC 8693 §2.2.2), JSON {"error", "error_description"}:
  401 invalid_client           no, or a wrong, client (Basic) — body credentials are not accepted
  400 unsupported_grant_type   another grant
  400 invalid_request          a missing subject token, or a token type it does not take
  400 invalid_grant            a subject token that does not verify, or whose `sub`
                               is in EXCHANGE_REFUSE_SUBJECTS
  400 invalid_target           no audience, or one not allowed
The answer (§2.2.1): {"access_token", "issued_token_type", "token_type":
"Bearer", "expires_in", "scope"}; the token is a JWT signed with this
server's own RS256 key (kid "exchange-rs256"): iss = this server's URL, sub
= the subject's `sub`, aud = the audience (a list when several), scope, iat,
exp, jti, client_id, act = {"sub": client id}.

GET /jwks: its public keys. GET /.well-known/oauth-authorization-server: its
metadata. GET /stats (for tests): {"exchanges", "refused", "subjects" (the
`sub` of each exchange, in order), "requests" (each request to /token: its
parameters, the subject token as its SHA-256 only, how the client
authenticated, and the outcome), "tokens" (every token issued, so a test
can look for them where they must not be)}.

Env: EXCHANGE_PORT (default 0: any free port), EXCHANGE_SUBJECT_ISSUER,
EXCHANGE_SUBJECT_JWKS (default {issuer}/jwks, oidc-provider's path),
EXCHANGE_SUBJECT_AUDIENCE (optional), EXCHANGE_CLIENT_ID (default hangar),
EXCHANGE_CLIENT_SECRET (default s3cret), EXCHANGE_AUDIENCES (a JSON object:
allowed audience → token lifetime in seconds, or a JSON list of audiences),
EXCHANGE_TTL (the lifetime where none is given, default 600),
EXCHANGE_REFUSE_SUBJECTS (comma-separated subjects it will not act for).
Prints "ready PORT" on stdout once it listens.
"""

import base64
import hashlib
import json
import os
import socket
import time
import uuid
from urllib.parse import parse_qs, unquote_plus

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
SUBJECT_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]

SUBJECT_ISSUER = os.environ["EXCHANGE_SUBJECT_ISSUER"]
SUBJECT_JWKS = os.environ.get("EXCHANGE_SUBJECT_JWKS") or f"{SUBJECT_ISSUER}/jwks"
SUBJECT_AUDIENCE = os.environ.get("EXCHANGE_SUBJECT_AUDIENCE") or None
CLIENT_ID = os.environ.get("EXCHANGE_CLIENT_ID", "hangar")
CLIENT_SECRET = os.environ.get("EXCHANGE_CLIENT_SECRET", "s3cret")
TTL = int(os.environ.get("EXCHANGE_TTL", "600"))
_audiences = json.loads(os.environ.get("EXCHANGE_AUDIENCES", "[]"))
AUDIENCES = ({a: TTL for a in _audiences} if isinstance(_audiences, list)
             else {a: int(ttl) for a, ttl in _audiences.items()})
REFUSE_SUBJECTS = {s for s in os.environ.get("EXCHANGE_REFUSE_SUBJECTS", "").split(",") if s}

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KID = "exchange-rs256"
PUBLIC_JWK = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
PUBLIC_JWK.update(kid=KID, alg="RS256", use="sig")

subject_keys = jwt.PyJWKClient(SUBJECT_JWKS, cache_keys=True, lifespan=60)
issuer = ""  # this server's URL, once its port is known
STATS = {"exchanges": 0, "refused": 0, "subjects": [], "requests": [], "tokens": []}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def refuse(record: dict, status: int, error: str, description: str) -> JSONResponse:
    record["outcome"] = error
    STATS["refused"] += 1
    headers = {"cache-control": "no-store"}
    if status == 401:
        headers["www-authenticate"] = 'Basic realm="exchange"'
    return JSONResponse({"error": error, "error_description": description}, status, headers=headers)


def basic_client(request: Request):
    """(client_id, client_secret) from `Authorization: Basic`, each form-decoded
    (RFC 6749 §2.3.1), or None."""
    value = request.headers.get("authorization", "")
    scheme, _, encoded = value.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except ValueError:
        return None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        return None
    return unquote_plus(client_id), unquote_plus(secret)


def verify_subject(token: str) -> dict:
    key = subject_keys.get_signing_key_from_jwt(token)
    options = {"require": ["exp", "iss", "sub"], "verify_aud": SUBJECT_AUDIENCE is not None}
    return jwt.decode(token, key.key, algorithms=SUBJECT_ALGS, issuer=SUBJECT_ISSUER,
                      audience=SUBJECT_AUDIENCE, options=options, leeway=0)


async def token(request: Request) -> JSONResponse:
    body = (await request.body()).decode("utf-8", "replace")
    form = parse_qs(body, keep_blank_values=True)
    one = lambda name: form.get(name, [None])[0]  # noqa: E731
    basic = basic_client(request)
    subject_token = one("subject_token")
    record = {
        "content_type": request.headers.get("content-type"),
        "client_auth": "basic" if basic else ("post" if "client_id" in form else "none"),
        "client_id": basic[0] if basic else one("client_id"),
        "grant_type": one("grant_type"),
        "subject_token_sha256": sha256(subject_token) if subject_token else None,
        "subject_token_type": one("subject_token_type"),
        "requested_token_type": one("requested_token_type"),
        "actor_token": "actor_token" in form,
        "audience": form.get("audience", []),
        "resource": form.get("resource", []),
        "scope": one("scope"),
        "params": sorted(form),
    }
    STATS["requests"].append(record)
    if not (request.headers.get("content-type") or "").startswith("application/x-www-form-urlencoded"):
        return refuse(record, 400, "invalid_request", "the body must be application/x-www-form-urlencoded")
    if basic is None or basic != (CLIENT_ID, CLIENT_SECRET) or "client_secret" in form:
        return refuse(record, 401, "invalid_client", "client authentication failed")
    if one("grant_type") != GRANT:
        return refuse(record, 400, "unsupported_grant_type", f"only {GRANT}")
    if not subject_token:
        return refuse(record, 400, "invalid_request", "subject_token is missing")
    if one("subject_token_type") != ACCESS_TOKEN:
        return refuse(record, 400, "invalid_request", f"subject_token_type must be {ACCESS_TOKEN}")
    requested = one("requested_token_type")
    if requested not in (None, ACCESS_TOKEN, JWT_TYPE):
        return refuse(record, 400, "invalid_request", f"cannot issue {requested}")
    if "actor_token" in form:
        return refuse(record, 400, "invalid_request", "actor tokens are not taken")
    try:
        subject = verify_subject(subject_token)
    except (jwt.PyJWTError, jwt.PyJWKClientError) as e:
        return refuse(record, 400, "invalid_grant", f"the subject token is not valid: {e}")
    if subject["sub"] in REFUSE_SUBJECTS:
        return refuse(record, 400, "invalid_grant", "this server does not act for that subject")
    targets = record["audience"] + record["resource"]
    if not targets:
        return refuse(record, 400, "invalid_target", "name an audience")
    unknown = [t for t in targets if t not in AUDIENCES]
    if unknown:
        return refuse(record, 400, "invalid_target", f"no tokens for {unknown[0]}")
    ttl = min(AUDIENCES[t] for t in targets)
    now = int(time.time())
    claims = {
        "iss": issuer, "sub": subject["sub"], "aud": targets[0] if len(targets) == 1 else targets,
        "iat": now, "exp": now + ttl, "jti": uuid.uuid4().hex, "client_id": CLIENT_ID,
        "act": {"sub": CLIENT_ID},
    }
    scope = one("scope")
    if scope:
        claims["scope"] = scope
    issued = jwt.encode(claims, KEY, "RS256", headers={"kid": KID, "typ": "at+jwt"})
    record["outcome"] = "issued"
    record["issued_sha256"] = sha256(issued)
    STATS["exchanges"] += 1
    STATS["subjects"].append(subject["sub"])
    STATS["tokens"].append(issued)
    answer = {"access_token": issued, "issued_token_type": ACCESS_TOKEN, "token_type": "Bearer",
              "expires_in": ttl}
    if scope:
        answer["scope"] = scope
    return JSONResponse(answer, headers={"cache-control": "no-store", "pragma": "no-cache"})


async def jwks(_: Request) -> JSONResponse:
    return JSONResponse({"keys": [PUBLIC_JWK]})


async def metadata(_: Request) -> JSONResponse:
    return JSONResponse({
        "issuer": issuer, "token_endpoint": f"{issuer}/token", "jwks_uri": f"{issuer}/jwks",
        "grant_types_supported": [GRANT],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    })


async def stats(_: Request) -> JSONResponse:
    return JSONResponse(STATS)


app = Starlette(routes=[
    Route("/token", token, methods=["POST"]),
    Route("/jwks", jwks),
    Route("/.well-known/oauth-authorization-server", metadata),
    Route("/stats", stats),
])


if __name__ == "__main__":
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("EXCHANGE_PORT", "0"))))
    sock.listen(128)
    port = sock.getsockname()[1]
    issuer = f"http://127.0.0.1:{port}"
    # Listening (connections wait in the backlog until uvicorn accepts them).
    print(f"ready {port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
