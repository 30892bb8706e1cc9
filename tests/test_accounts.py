"""Each user's own accounts (issue 63): a `[credentials.NAME]` provider of
kind "oauth2-user" (authorization code + PKCE at a third party) or
"user-key" (a key the user pastes) gives a guest calling
`credentials.get(NAME)` the token of the user behind the call.

The third party is a real authorization server nobody here wrote:
oidc-provider (tests/clients/oidc_server.mjs), with a client registered
dynamically for each Hangar. A user connects at `/connect/NAME` with a
browser: here `Browser`, plain HTTP that follows redirects and fills
oidc-provider's login and consent forms, and once Chromium. What a guest
answers is checked at the provider: the token works at its userinfo endpoint
and names the user. Callers are told apart by the `api-key` auth plugin
(and, for teams, by `jwt` tokens carrying an `org` claim); the guest is the
test plugin `http-fetch`, whose tool `credential {provider}` answers the
token or the error."""

import asyncio
import base64
import threading
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
import jwt as pyjwt
import pytest

from conftest import Mcp, Server, run_hangar, wait_for
from test_explorer import browser  # noqa: F401 (the Chromium fixture)
from test_oauth import AuthServer

USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
         "ivan", "judy", "kate", "leo", "nina", "oscar", "peggy"]
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()
NOTES_SECRET_ENV = "NOTES_CLIENT_SECRET"
JWT_SECRET = "an-hs256-secret-of-at-least-32-bytes"
NO_CREDENTIALS = re.compile(
    r'^credentials: no credentials for "(?P<provider>[^"]+)": connect it at (?P<url>\S+)$')


def key(user: str) -> str:
    return f"{user}-key-0123456789abcdef"


def as_user(user: str) -> dict:
    """The headers that make a request `user`'s (the api-key plugin)."""
    return {"x-api-key": key(user)}


# ---------------------------------------------------------------- the provider

class Provider(AuthServer):
    """oidc-provider as the third party whose accounts users connect."""

    def register(self, redirect_uri: str, name: str = "hangar-accounts") -> dict:
        """A confidential client (RFC 7591) that may refresh; `name`
        "short-lived" gets access tokens that expire after 4 s."""
        r = httpx.post(f"{self.issuer}/reg", json={
            "client_name": name, "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "client_secret_basic"})
        assert r.status_code == 201, r.text
        return r.json()

    def userinfo(self, token: str) -> dict | None:
        """Who `token` is at the provider, or None when it is refused."""
        r = httpx.get(f"{self.issuer}/me", headers={"authorization": f"Bearer {token}"})
        return r.json() if r.status_code == 200 else None

    def revoke(self, client: dict, token: str):
        """RFC 7009. oidc-provider revokes the token's whole grant: the
        refresh token issued with an access token goes with it."""
        r = httpx.post(f"{self.issuer}/token/revocation", data={"token": token},
                       auth=(client["client_id"], client["client_secret"]))
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def provider():
    p = Provider(prefix="accounts")
    yield p
    p.stop()


# ----------------------------------------------------------------- the browser

class Form(HTMLParser):
    """The first form of a page: its method, action and named inputs."""

    def __init__(self, html: str):
        super().__init__()
        self.method, self.action, self.fields = None, None, {}
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and self.action is None:
            self.method, self.action = (a.get("method") or "get").lower(), a.get("action")
        if tag == "input" and a.get("name"):
            self.fields[a["name"]] = {"type": a.get("type", "text"), "value": a.get("value") or ""}


class Browser:
    """A user's browser over plain HTTP: one cookie jar, redirects followed
    one by one, and oidc-provider's login and consent pages answered as the
    user `login` would."""

    def __init__(self, login: str):
        self.login = login
        self.http = httpx.Client(timeout=30)

    def visit(self, url: str, headers: dict | None = None, stop_at: str | None = None):
        """GETs `url` (with `headers`, on that first request only) and goes
        on from there: the location of a redirect to a URL starting with
        `stop_at` (not requested), else the first response that is neither a
        redirect nor a provider's form."""
        return self.follow(self.http.get(url, headers=headers), stop_at)

    def follow(self, r: httpx.Response, stop_at: str | None = None):
        for _ in range(20):
            if r.is_redirect:
                location = urljoin(str(r.url), r.headers["location"])
                if stop_at and location.startswith(stop_at):
                    return location
                r = self.http.get(location)
            elif r.status_code == 200 and 'id="continue"' in r.text:
                # Hangar's page before the provider's (a connect link): it
                # names the user; the user reads it and goes on.
                assert f"<b>{self.login}</b>" in r.text, r.text
                href = re.search(r'id="continue" href="([^"]+)"', r.text)[1]
                r = self.http.get(href.replace("&amp;", "&"))
            elif r.status_code == 200 and r.url.path.startswith("/interaction/"):
                form = Form(r.text)
                data = {name: f["value"] for name, f in form.fields.items()}
                if "login" in data:
                    data.update(login=self.login, password="any")
                r = self.http.post(urljoin(str(r.url), form.action), data=data)
            else:
                return r
        pytest.fail("the browser went round in redirects")

    def get(self, url: str, **kw) -> httpx.Response:
        return self.http.get(url, **kw)

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar)


# ------------------------------------------------------------------ the server

def public_config(server: Server, body: str, throttled: bool = False) -> None:
    """Writes `server`'s config: its own URL as [server] public_url, then
    `body`. Tests here are refused on purpose, all from one address: unless
    `throttled`, the throttle they would meet (tested in
    test_fail_closed.py) is lifted."""
    server.config_path.write_text(
        f'[server]\ncache_dir = "{server.workdir / "cache"}"\npublic_url = "{server.url}"\n'
        + ("" if throttled else 'auth_failures = "1000/m"\n') + body)


API_KEY_AUTH = f"""
[auth]
plugin = "api-key"

[plugins.api-key]
config = {{ keys = "{', '.join(f'{u}={key(u)}' for u in USERS)}" }}
"""

JWT_AUTH = f"""
[auth]
plugin = "jwt"
policy = {{ audience = "hangar" }}

[plugins.jwt]
config = {{ hs256_secret = "{JWT_SECRET}" }}
"""

ENCRYPTION = """
[credentials]
encryption_key = "{{ env.HANGAR_CREDENTIALS_KEY }}"
"""

GRANTS = """
[plugins.http-fetch]
grants = { credentials = ["notes", "paste"] }
"""


def notes_provider(provider: Provider, client: dict, extra: str = "") -> str:
    return f"""
[credentials.notes]
kind = "oauth2-user"
authorize_url = "{provider.issuer}/auth"
token_url = "{provider.issuer}/token"
client_id = "{client['client_id']}"
client_secret = "{{{{ env.{NOTES_SECRET_ENV} }}}}"
scopes = ["openid", "offline_access"]
authorize_params = {{ prompt = "consent" }}
userinfo_url = "{provider.issuer}/me"
{extra}
[credentials.paste]
kind = "user-key"
"""


@pytest.fixture(scope="module")
def start_hangar(tmp_path_factory, provider):
    """Starts a Hangar whose notes provider is a client registered for its
    own callback URL (known once its port is), with a cache folder, and so a
    kv file, of its own. Answers (server, client)."""
    servers = []

    def start(client_name="hangar-accounts", auth=API_KEY_AUTH, notes_extra="",
              plugins=("http-fetch", "api-key"), throttled=False):
        s = Server(tmp_path_factory.mktemp("accounts"), plugins)
        client = provider.register(f"{s.url}/connect/notes/callback", client_name)
        public_config(s, auth + ENCRYPTION + notes_provider(provider, client, notes_extra) + GRANTS,
                      throttled)
        s.env = {"HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY, NOTES_SECRET_ENV: client["client_secret"]}
        servers.append(s)
        return s.start(), client

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def hangar(start_hangar):
    return start_hangar()


@pytest.fixture(scope="module")
def short_lived(start_hangar):
    """A Hangar whose client's access tokens live 4 s."""
    return start_hangar(client_name="short-lived")


# ------------------------------------------------------------------ what users do

def credential(server: Server, headers: dict, provider: str = "notes") -> tuple[bool, str]:
    """What the guest's `credentials.get(provider)` gives a call made with
    `headers`: (is_error, the token or the error's text)."""
    c = Mcp(server.url)
    c.http.headers.update(headers)
    r = c.call("credential", {"provider": provider})
    assert "result" in r, r
    return r["result"]["isError"], r["result"]["content"][0]["text"]


def token_of(server: Server, headers: dict, provider: str = "notes") -> str:
    is_error, text = credential(server, headers, provider)
    assert not is_error, text
    return text


def connect_url(server: Server, headers: dict, provider: str = "notes") -> str:
    """The connect URL (with its ticket) the error of an unconnected caller gives."""
    is_error, text = credential(server, headers, provider)
    assert is_error, text
    m = NO_CREDENTIALS.match(text)
    assert m and m["provider"] == provider, text
    return m["url"]


def listing(server: Server, headers: dict) -> dict:
    """GET /connect for the caller, by provider name."""
    r = httpx.get(f"{server.url}/connect", headers=headers)
    assert r.status_code == 200, r.text
    return {p["name"]: p for p in r.json()["providers"]}


def connected(server: Server, headers: dict, provider: str = "notes") -> bool:
    return listing(server, headers)[provider]["connected"]


def callback_prefix(server: Server, provider: str = "notes") -> str:
    return f"{server.url}/connect/{provider}/callback"


def connect(server: Server, user: str) -> httpx.Response:
    """`user` connects their notes account: opens /connect/notes with their
    key, logs in at the provider as themselves, consents; Hangar's answer."""
    return Browser(user).visit(f"{server.url}/connect/notes", headers=as_user(user))


def paste_form(b: Browser, url: str, headers: dict | None = None) -> dict:
    """The paste page at `url` opened in `b`: the form's fields, checked."""
    page = b.get(url, headers=headers)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    cookie = [part.strip().lower() for part in cookie_of(page).split(";")]
    assert {"httponly", "samesite=lax", "path=/connect/paste"} <= set(cookie), cookie
    form = Form(page.text)
    assert form.method == "post" and form.action == "/connect/paste", (form.method, form.action)
    assert form.fields["state"]["type"] == "hidden" and form.fields["state"]["value"]
    assert "key" in form.fields
    return form.fields


def assert_connected_page(r: httpx.Response):
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("text/html"), r.headers
    assert "Connected" in r.text, r.text


def assert_refused_page(r: httpx.Response):
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("text/html"), r.headers


def assert_user_token(provider: Provider, token: str, user: str):
    assert provider.userinfo(token) == {"sub": user, "email": f"{user}@example.com"}, token


def kv_bytes(server: Server) -> bytes:
    """The embedded kv store's files (the database and its WAL)."""
    files = sorted((server.workdir / "cache").glob("kv.sqlite3*"))
    assert files, list((server.workdir / "cache").iterdir())
    return b"".join(f.read_bytes() for f in files)


def assert_nowhere_at_rest(server: Server, *secrets: str):
    """None of `secrets` is in the kv files or the log."""
    stored, log = kv_bytes(server), server.log_text()
    for secret in secrets:
        assert secret.encode() not in stored, f"{secret[:6]}… is in the kv store in plain text"
        assert secret not in log, f"{secret[:6]}… is in the log"


def cookie_of(r: httpx.Response) -> str:
    """The Set-Cookie line of hangar_connect."""
    lines = [c for c in r.headers.get_list("set-cookie") if c.startswith("hangar_connect=")]
    assert len(lines) == 1, r.headers.get_list("set-cookie")
    return lines[0]


def start_flow(server: Server, user: str):
    """`user` starts connecting notes and goes through the provider, which
    redirects back: (their browser, the callback URL, not yet opened)."""
    b = Browser(user)
    location = b.visit(f"{server.url}/connect/notes", headers=as_user(user),
                       stop_at=callback_prefix(server))
    assert isinstance(location, str), (location.status_code, location.text)
    return b, location


# ----------------------------------------------------------------------- tests

def test_get_connect_lists_the_callers_providers(hangar):
    server, _ = hangar
    providers = listing(server, as_user("ivan"))
    assert providers == {
        "notes": {"name": "notes", "kind": "oauth2-user", "connected": False, "account": None,
                  "url": f"{server.url}/connect/notes"},
        "paste": {"name": "paste", "kind": "user-key", "connected": False, "account": None,
                  "url": f"{server.url}/connect/paste"},
    }
    for headers in ({}, {"x-api-key": "not-a-key"}):
        r = httpx.get(f"{server.url}/connect", headers=headers)
        assert r.status_code == 401, r.text
        assert "error" in r.json(), r.text


def test_connect_redirects_to_the_provider_with_pkce_and_binds_the_browser(hangar, provider):
    server, client = hangar
    r = httpx.get(f"{server.url}/connect/notes", headers=as_user("judy"))
    assert r.status_code == 302, r.text
    location = urlparse(r.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{provider.issuer}/auth"
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert query.pop("state") and re.fullmatch(r"[A-Za-z0-9_-]{43}", query.pop("code_challenge")), query
    assert query == {
        "response_type": "code", "client_id": client["client_id"],
        "redirect_uri": f"{server.url}/connect/notes/callback", "scope": "openid offline_access",
        "code_challenge_method": "S256", "prompt": "consent"}
    cookie = [part.strip().lower() for part in cookie_of(r).split(";")]
    assert {"httponly", "samesite=lax", "path=/connect/notes"} <= set(cookie), cookie
    # Each start is its own: another state, another cookie.
    again = httpx.get(f"{server.url}/connect/notes", headers=as_user("judy"))
    assert parse_qs(urlparse(again.headers["location"]).query)["state"][0] != parse_qs(location.query)["state"][0]
    assert cookie_of(again).split(";")[0] != cookie_of(r).split(";")[0]
    # Unknown provider; no caller; a ticket nobody was given.
    assert httpx.get(f"{server.url}/connect/nope", headers=as_user("judy")).status_code == 404
    assert httpx.get(f"{server.url}/connect/notes").status_code == 401
    assert httpx.get(f"{server.url}/connect/notes", headers={"x-api-key": "wrong"}).status_code == 401
    assert httpx.get(f"{server.url}/connect/notes?ticket=forged").status_code == 401


def test_each_user_connects_and_gets_their_own_token(hangar, provider):
    server, client = hangar
    assert connect_url(server, as_user("alice")).startswith(f"{server.url}/connect/notes?ticket=")
    tokens = {}
    for user in ("alice", "bob"):
        assert_connected_page(connect(server, user))
        tokens[user] = token_of(server, as_user(user))
        assert_user_token(provider, tokens[user], user)
        entry = listing(server, as_user(user))["notes"]
        assert entry["connected"] is True
        assert entry["account"] in (user, f"{user}@example.com"), entry
    assert tokens["alice"] != tokens["bob"]
    # Still each their own on later calls, and the other user's listing is theirs.
    assert token_of(server, as_user("alice")) == tokens["alice"]
    assert listing(server, as_user("ivan"))["notes"]["connected"] is False
    assert_nowhere_at_rest(server, *tokens.values(), client["client_secret"])


def test_connections_are_sealed_at_rest_and_survive_a_restart(hangar, provider):
    server, _ = hangar
    assert_connected_page(connect(server, "heidi"))
    token = token_of(server, as_user("heidi"))
    assert_nowhere_at_rest(server, token)
    server.stop()
    server.start()
    assert token_of(server, as_user("heidi")) == token
    assert_user_token(provider, token, "heidi")
    assert_nowhere_at_rest(server, token)


def test_the_ticket_url_in_the_error_connects_a_browser_without_credentials(hangar, provider):
    server, _ = hangar
    url = connect_url(server, as_user("carol"))
    assert url.startswith(f"{server.url}/connect/notes?ticket=")
    # A browser that never saw carol's key: the ticket says who it is for.
    assert_connected_page(Browser("carol").visit(url))
    token = token_of(server, as_user("carol"))
    assert_user_token(provider, token, "carol")
    assert connected(server, as_user("carol"))
    # Single use: the same URL again is refused, before the provider is involved.
    again = httpx.get(url)
    assert again.status_code == 401, again.text
    assert_nowhere_at_rest(server, token)


def test_a_ticket_opened_with_another_users_credentials_connects_nobody(hangar):
    """Kate's connect link, opened by a client that proves it is Leo: refused,
    and neither Kate nor Leo is connected."""
    server, _ = hangar
    url = connect_url(server, as_user("kate"))
    r = httpx.get(url, headers=as_user("leo"))
    assert r.status_code == 400 and "another user" in r.text, r.text
    assert not connected(server, as_user("kate")) and not connected(server, as_user("leo"))


def sdk_credential(server: Server, user: str, on_url=None) -> tuple[bool, str, list]:
    """`credential {provider: notes}` called by the Python SDK as `user`;
    with `on_url`, the client declares elicitation (the SDK declares form
    and URL modes) and `on_url(url)` runs for a URL-mode request, which the
    client accepts. Answers (is_error, text, the elicitations seen)."""
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamablehttp_client

    seen = []

    async def elicit(context, params):
        seen.append(params)
        if getattr(params, "mode", None) == "url":
            # The user opens the page while the call waits.
            threading.Thread(target=on_url, args=(params.url,), daemon=True).start()
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="decline")

    async def run():
        async with streamablehttp_client(f"{server.url}/mcp", headers=as_user(user)) as (r, w, _):
            kwargs = {"elicitation_callback": elicit} if on_url else {}
            async with ClientSession(r, w, **kwargs) as session:
                await session.initialize()
                return await session.call_tool("credential", {"provider": "notes"})

    result = asyncio.run(run())
    return result.isError, result.content[0].text, seen


def test_a_client_declaring_url_elicitation_is_sent_to_connect_and_the_call_goes_on(hangar, provider):
    """No credential, and the client declared URL-mode elicitation (MCP
    2025-11-25): Hangar sends elicitation/create with mode "url" naming the
    connect page (with a ticket for this user), waits while the user
    connects in a browser, and the same call answers the user's token."""
    server, _ = hangar
    pages = []

    def user_opens(url):
        pages.append(Browser("oscar").visit(url))

    is_error, text, seen = sdk_credential(server, "oscar", on_url=user_opens)
    assert not is_error, text
    assert [p.mode for p in seen] == ["url"], seen
    assert seen[0].url.startswith(f"{server.url}/connect/notes?ticket="), seen[0]
    assert seen[0].elicitationId and "notes" in seen[0].message
    assert_connected_page(pages[0])
    assert_user_token(provider, text, "oscar")
    # Connected now: the next call asks nothing.
    is_error, again, seen = sdk_credential(server, "oscar", on_url=user_opens)
    assert (is_error, again, seen) == (False, text, [])


def test_a_client_without_url_elicitation_gets_the_connect_url_in_the_error(hangar):
    server, _ = hangar
    is_error, text, _ = sdk_credential(server, "peggy")
    assert is_error, text
    m = NO_CREDENTIALS.match(text)
    assert m and m["url"].startswith(f"{server.url}/connect/notes?ticket="), text


def test_connecting_in_browsers_is_not_a_failed_authentication(start_hangar, provider):
    """A browser sends no API key: opening a connect link (its ticket is its
    authentication) and the provider's redirect back to the callback are
    not failed authentications. Else a few users connecting from one address
    (an office behind one NAT) would have it refused (auth_failures, 10 a
    minute by default), their MCP calls with good keys too."""
    server, _ = start_hangar(throttled=True)
    users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]
    for user in users:
        assert_connected_page(Browser(user).visit(connect_url(server, as_user(user))))
    for user in users:
        assert_user_token(provider, token_of(server, as_user(user)), user)


def test_a_short_lived_token_is_refreshed_one_refresh_at_a_time(short_lived, provider):
    server, _ = short_lived
    assert_connected_page(connect(server, "alice"))
    connected_at = time.monotonic()
    first = token_of(server, as_user("alice"))
    assert_user_token(provider, first, "alice")
    wait_for(lambda: time.monotonic() > connected_at + 5, 10, "the access token to expire")
    assert provider.userinfo(first) is None  # expired at the provider
    second = token_of(server, as_user("alice"))
    assert second != first
    assert_user_token(provider, second, "alice")
    # Expired again: many calls at once. The provider rotates refresh
    # tokens and revokes the grant when one is used twice, so two refreshes
    # racing with the same refresh token would leave errors here.
    refreshed_at = time.monotonic()
    wait_for(lambda: time.monotonic() > refreshed_at + 5, 10, "the access token to expire")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: credential(server, as_user("alice")), range(16)))
    assert all(not is_error for is_error, _ in results), results
    third = {text for _, text in results}
    assert second not in third
    for token in third:
        assert_user_token(provider, token, "alice")
    assert_nowhere_at_rest(server, first, second, *third)


def test_two_replicas_refresh_a_connection_once(tmp_path_factory, provider):
    """Two Hangars sharing one kv store (Redis, as replicas do): a user
    connected through the first, whose access token expired, calls both at
    once. The provider rotates refresh tokens and revokes the grant when one
    is used twice, so a refresh on each replica would end in errors and a
    lost connection: one replica refreshes, the other waits for what it
    stores, and every call gets a working token."""
    from conftest import REDIS_URL
    prefix = f"hangar-test-accounts:{os.urandom(6).hex()}"
    a = Server(tmp_path_factory.mktemp("replica-a"), ("http-fetch", "api-key"))
    b = Server(tmp_path_factory.mktemp("replica-b"), ("http-fetch", "api-key"))
    client = provider.register(f"{a.url}/connect/notes/callback", "short-lived")
    shared = f"""
[kv]
backend = "redis"
url = "{REDIS_URL}"
prefix = "{prefix}"
"""
    extra = f'redirect_uri = "{a.url}/connect/notes/callback"\n'
    for s in (a, b):
        public_config(s, API_KEY_AUTH + ENCRYPTION + notes_provider(provider, client, extra)
                      + GRANTS + shared)
        s.env = {"HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY,
                 NOTES_SECRET_ENV: client["client_secret"]}
        s.start()
    try:
        assert_connected_page(connect(a, "judy"))
        connected_at = time.monotonic()
        first = token_of(b, as_user("judy"))  # made through a, read on b
        assert_user_token(provider, first, "judy")
        for round_ in range(2):
            wait_for(lambda: time.monotonic() > connected_at + 5, 10, "the access token to expire")
            with ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda i: credential((a, b)[i % 2], as_user("judy")),
                                        range(16)))
            connected_at = time.monotonic()
            assert all(not is_error for is_error, _ in results), results
            tokens = {text for _, text in results}
            assert first not in tokens
            for token in tokens:
                assert_user_token(provider, token, "judy")
        assert connected(a, as_user("judy")) and connected(b, as_user("judy"))
    finally:
        a.stop()
        b.stop()
        from test_kv import redis_command, redis_keys
        for k in redis_keys(f"{prefix}*"):
            redis_command("DEL", k)


def test_a_revoked_grant_asks_the_user_to_connect_again(short_lived, provider):
    server, client = short_lived
    assert_connected_page(connect(server, "bob"))
    token = token_of(server, as_user("bob"))
    provider.revoke(client, token)  # and with it the refresh token Hangar holds
    assert provider.userinfo(token) is None
    revoked_at = time.monotonic()
    wait_for(lambda: time.monotonic() > revoked_at + 5, 10, "the access token to expire")
    is_error, text = credential(server, as_user("bob"))
    assert is_error, text
    m = re.search(rf"again at ({re.escape(server.url)}/connect/notes\?ticket=\S+)$", text)
    assert m and text.startswith("credentials: notes: "), text
    assert not connected(server, as_user("bob"))
    # The connection is gone: the next call is an unconnected caller's.
    assert connect_url(server, as_user("bob")).startswith(f"{server.url}/connect/notes?ticket=")
    # The link in the error connects bob again.
    assert_connected_page(Browser("bob").visit(m[1]))
    assert_user_token(provider, token_of(server, as_user("bob")), "bob")


def test_a_forged_state_or_a_missing_or_other_cookie_stores_nothing(hangar):
    server, _ = hangar
    b, callback = start_flow(server, "dave")
    code = parse_qs(urlparse(callback).query)["code"][0]
    # A state Hangar never handed out, with the browser's real cookie.
    assert_refused_page(b.get(f"{callback_prefix(server)}?code={code}&state=forged"))
    # The real callback without the cookie that started it.
    _, callback = start_flow(server, "dave")
    assert_refused_page(httpx.get(callback))
    # ... or with the cookie of another flow of the same user.
    _, callback = start_flow(server, "dave")
    other, _ = start_flow(server, "dave")
    assert_refused_page(other.get(callback))
    assert not connected(server, as_user("dave"))
    assert credential(server, as_user("dave"))[0] is True


def test_a_refusal_at_the_provider_stores_nothing(hangar):
    """The user denies consent (the provider redirects back with
    `error=access_denied`), or the code is refused at the token endpoint."""
    server, _ = hangar
    b, callback = start_flow(server, "judy")
    state = parse_qs(urlparse(callback).query)["state"][0]
    assert_refused_page(b.get(f"{callback_prefix(server)}?error=access_denied&state={state}"))
    b, callback = start_flow(server, "judy")
    assert_refused_page(b.get(re.sub(r"code=[^&]+", "code=not-a-code", callback)))
    assert not connected(server, as_user("judy"))


def test_a_state_started_for_another_provider_is_refused(hangar):
    server, _ = hangar
    b = Browser("dave")
    page = b.get(f"{server.url}/connect/paste", headers=as_user("dave"))
    assert page.status_code == 200, page.text
    state = Form(page.text).fields["state"]["value"]
    r = b.get(f"{callback_prefix(server)}?code=anything&state={state}",
              headers={"cookie": b.cookie_header()})
    assert_refused_page(r)
    assert not connected(server, as_user("dave"))


def test_a_callback_is_used_once(hangar, provider):
    server, _ = hangar
    b, callback = start_flow(server, "grace")
    assert_connected_page(b.get(callback))
    token = token_of(server, as_user("grace"))
    assert_refused_page(b.get(callback))
    # The replay changed nothing.
    assert token_of(server, as_user("grace")) == token
    assert_user_token(provider, token, "grace")


def test_a_callback_with_another_principals_credentials_is_refused(hangar):
    server, _ = hangar
    b, callback = start_flow(server, "erin")
    assert_refused_page(b.get(callback, headers=as_user("frank")))
    assert not connected(server, as_user("erin"))
    assert not connected(server, as_user("frank"))


def test_a_user_key_connects_by_form_and_by_json_and_disconnects(hangar):
    server, _ = hangar
    # By the form, in a browser; not without the cookie the page set.
    b = Browser("kate")
    state = paste_form(b, f"{server.url}/connect/paste", as_user("kate"))["state"]["value"]
    assert_refused_page(httpx.post(f"{server.url}/connect/paste",
                                   data={"state": state, "key": "kate-pasted-key-6f1e"}))
    assert credential(server, as_user("kate"), "paste")[0] is True
    state = paste_form(b, f"{server.url}/connect/paste", as_user("kate"))["state"]["value"]
    assert_connected_page(b.http.post(f"{server.url}/connect/paste",
                                      data={"state": state, "key": "kate-pasted-key-6f1e"}))
    assert token_of(server, as_user("kate"), "paste") == "kate-pasted-key-6f1e"
    assert connected(server, as_user("kate"), "paste")
    # By JSON, with the caller's own credentials.
    r = httpx.post(f"{server.url}/connect/paste", json={"key": "leo-pasted-key-09ab"}, headers=as_user("leo"))
    assert r.status_code == 200 and r.json() == {"connected": True}, r.text
    assert token_of(server, as_user("leo"), "paste") == "leo-pasted-key-09ab"
    assert token_of(server, as_user("kate"), "paste") == "kate-pasted-key-6f1e"
    assert_nowhere_at_rest(server, "kate-pasted-key-6f1e", "leo-pasted-key-09ab")
    # Disconnecting is the caller's own.
    r = httpx.delete(f"{server.url}/connect/paste", headers=as_user("kate"))
    assert r.status_code == 200 and r.json() == {"connected": False}, r.text
    url = connect_url(server, as_user("kate"), "paste")
    assert url.startswith(f"{server.url}/connect/paste?ticket=")
    assert not connected(server, as_user("kate"), "paste")
    assert token_of(server, as_user("leo"), "paste") == "leo-pasted-key-09ab"
    assert httpx.delete(f"{server.url}/connect/paste").status_code == 401
    assert httpx.post(f"{server.url}/connect/paste", json={"key": "nobody"}).status_code == 401
    # The link in kate's error opens the form in a browser without her key.
    b = Browser("kate")
    state = paste_form(b, url)["state"]["value"]
    assert_connected_page(b.http.post(f"{server.url}/connect/paste",
                                      data={"state": state, "key": "kate-second-key-77c0"}))
    assert token_of(server, as_user("kate"), "paste") == "kate-second-key-77c0"
    assert httpx.get(url).status_code == 401


def test_team_then_default_when_the_user_has_not_connected(start_hangar, provider):
    server, _ = start_hangar(auth=JWT_AUTH, plugins=("http-fetch", "jwt"), notes_extra="""
team_claim = "org"
teams = { acme = "team-acme-token" }
default = "server-wide-token"
""")

    def bearer(sub, **claims):
        token = pyjwt.encode({"sub": sub, "aud": "hangar", "exp": int(time.time()) + 600, **claims},
                             JWT_SECRET, "HS256")
        return {"authorization": f"Bearer {token}"}

    assert token_of(server, bearer("dave", org="acme")) == "team-acme-token"
    assert token_of(server, bearer("erin", org="globex")) == "server-wide-token"
    assert token_of(server, bearer("frank")) == "server-wide-token"
    # A user's own connection comes first.
    alice = bearer("alice", org="acme")
    assert_connected_page(Browser("alice").visit(f"{server.url}/connect/notes", headers=alice))
    own = token_of(server, alice)
    assert own != "team-acme-token"
    assert_user_token(provider, own, "alice")
    r = httpx.delete(f"{server.url}/connect/notes", headers=alice)
    assert r.status_code == 200 and r.json() == {"connected": False}, r.text
    assert token_of(server, alice) == "team-acme-token"
    assert "team-acme-token" not in server.log_text() and "server-wide-token" not in server.log_text()


def test_a_per_user_provider_needs_an_encryption_key_and_a_public_url(tmp_path, provider):
    (tmp_path / "plugins").mkdir()
    notes = notes_provider(provider, {"client_id": "c"})
    cases = {
        "encryption_key": f'[server]\npublic_url = "http://127.0.0.1:1"\n{notes}',
        "public_url": f"{ENCRYPTION}{notes}",
    }
    for needed, config in cases.items():
        path = tmp_path / f"no-{needed}.toml"
        path.write_text(config)
        out = run_hangar("check", "--config", str(path), "--plugins", str(tmp_path / "plugins"),
                         env={"HANGAR_CREDENTIALS_KEY": ENCRYPTION_KEY, NOTES_SECRET_ENV: "s"})
        assert out.returncode != 0, out.stdout
        assert needed in out.stdout + out.stderr, out.stdout + out.stderr
    # And `serve` refuses to start without the key.
    s = Server(tmp_path / "serve", ["http-fetch"], env={NOTES_SECRET_ENV: "s"})
    public_config(s, notes)
    with pytest.raises(RuntimeError, match="encryption_key"):
        s.start()
    s.stop()


def test_a_user_connects_in_chromium_from_the_ticket_url(hangar, provider, browser):  # noqa: F811
    server, _ = hangar
    url = connect_url(server, as_user("nina"))
    page = browser.new_page()
    try:
        page.goto(url)
        # Hangar's page names the user before the provider is reached.
        assert "nina" in page.locator("p").first.inner_text()
        page.click("#continue")
        page.fill('input[name="login"]', "nina")
        page.fill('input[name="password"]', "any")
        page.click('button[type="submit"]')
        page.wait_for_selector('input[name="prompt"][value="consent"]', state="attached")
        page.click('button[type="submit"]')  # consent
        page.wait_for_url(f"{callback_prefix(server)}?**")
        assert "Connected" in page.content()
    finally:
        page.close()
    token = token_of(server, as_user("nina"))
    assert_user_token(provider, token, "nina")
