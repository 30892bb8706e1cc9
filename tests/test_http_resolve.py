"""`[http] resolve`: names answered with a configured address instead of
DNS, and the address filter applied to what a granted *name* resolves to.

Each `*.api.test` name below is granted to the `http-fetch` guest (with the
upstream's port) and resolved by `[http] resolve` to an internal address:
private, link-local metadata, loopback, shared, and the IPv6 forms that
carry such an IPv4 address (IPv4-mapped, NAT64, 6to4) or are internal
themselves. Every request fails inside the guest with the `wasi:http` error
`HTTP-request-denied` before any connection, and the host logs
`http: <name>:<port> resolves to <ip> (<range>), not granted to plugin
http-fetch`.

The positive case: a name resolved to the upstream's loopback address is
reached when the grants also name that address and port literally (what
the guest could reach by the literal anyway); the upstream sees the name in
`Host`.
"""

import pytest

from conftest import client
from test_http_grants import PLUGINS, Upstream, log_line, refused_text, text_of

# name -> (address in [http] resolve, as the host log writes it, what the log says of its range)
REFUSED = {
    "private.api.test": ("10.0.0.1", "10.0.0.1", "private-use, 10.0.0.0/8"),
    "metadata.api.test": ("169.254.169.254", "169.254.169.254", "link-local, 169.254.0.0/16"),
    # 127.0.0.1:<port> is granted literally (below); 127.0.0.2 is not.
    "loopback.api.test": ("127.0.0.2", "127.0.0.2", "loopback, 127.0.0.0/8"),
    "cgnat.api.test": ("100.100.100.200", "100.100.100.200", "shared address space"),
    "mapped.api.test": ("::ffff:10.0.0.1", "::ffff:10.0.0.1", "IPv4-mapped of 10.0.0.1: private-use"),
    "nat64.api.test": ("64:ff9b::a00:1", "64:ff9b::a00:1", "NAT64) of 10.0.0.1: private-use"),
    "nat64-metadata.api.test": ("64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe", "NAT64) of 169.254.169.254: link-local"),
    "sixtofour.api.test": ("2002:0a00:0001::", "2002:a00:1::", "6to4 of 10.0.0.1: private-use"),
    "compatible.api.test": ("::10.0.0.1", "::a00:1", "IPv4-compatible"),
    "ula.api.test": ("fd00:ec2::254", "fd00:ec2::254", "unique-local, fc00::/7"),
    "teredo.api.test": ("2001::1", "2001::1", "Teredo, 2001::/32"),
    "benchmark.api.test": ("198.18.0.1", "198.18.0.1", "benchmarking, 198.18.0.0/15"),
}
REACHED = "named.api.test"


@pytest.fixture(scope="module")
def upstream():
    u = Upstream()
    u.thread.start()
    yield u
    u.httpd.shutdown()
    u.httpd.server_close()


@pytest.fixture(scope="module")
def server(start_server, upstream):
    port = upstream.port
    resolve = {name: addr for name, (addr, _, _) in REFUSED.items()}
    resolve[REACHED] = "127.0.0.1"
    table = ", ".join(f'"{name}" = "{addr}"' for name, addr in resolve.items())
    # The literal grant and the name granted on port 80 too are for the
    # positive case and its port check.
    grants = [f"{name}:{port}" for name in resolve] + [REACHED, f"127.0.0.1:{port}"]
    listed = ", ".join(f'"{g}"' for g in grants)
    config = (f'\n[http]\nresolve = {{ {table} }}\n'
              f'\n[plugins.http-fetch]\ngrants = {{ http = [{listed}] }}\n'
              f'\n[[tools]]\nname = "fetch"\nlimits = {{ deadline = "3s" }}\n')
    return start_server(plugins=PLUGINS, config=config)


def fetch(server, url):
    return client(server, 15).call("fetch", {"url": url})


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_granted_name_resolved_to_an_internal_address_is_refused(server, upstream, name):
    addr, logged, why = REFUSED[name]
    port = upstream.port
    r = fetch(server, f"http://{name}:{port}/hello?case={name}")
    refused_text(r)
    log_line(server, f"http: {name}:{port} resolves to {logged} (", why,
             "not granted to plugin http-fetch")
    assert not upstream.seen(query=f"case={name}")


def test_a_name_resolved_to_an_address_granted_literally_is_reached(server, upstream):
    port = upstream.port
    r = fetch(server, f"http://{REACHED}:{port}/hello?case=named")
    assert text_of(r) == "200 hello from upstream"
    [seen] = upstream.seen(query="case=named")
    assert seen["host"] == f"{REACHED}:{port}"


def test_the_literal_grant_is_for_its_port_only(server, upstream):
    """`127.0.0.1:<port>` lets the name through on that port alone: granted
    on port 80 as well, the name is refused there after resolution."""
    r = fetch(server, f"http://{REACHED}/hello?case=port80")
    refused_text(r)
    log_line(server, f"http: {REACHED}:80 resolves to 127.0.0.1 (loopback",
             "not granted to plugin http-fetch")
    assert not upstream.seen(query="case=port80")
