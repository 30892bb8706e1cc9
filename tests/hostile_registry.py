"""A registry of the tests' own, for what Debian's docker-registry will not
do: it speaks just enough of the OCI distribution API (`GET /v2/`,
manifests by tag and by digest, blobs, the cosign `sha256-<hex>.sig` tag)
to serve one Wasm artifact, and attacks whoever pulls it. Each repository
is one behaviour (`oci://HOST/<repository>:1.0`):

- `good`: the component as `hangar push` writes it; no signature tag.
- `oversized-blob`: the layer is declared as 8 bytes; its blob streams
  `flood_mib` MiB (chunked, no length).
- `endless-manifest`: the manifest streams `flood_mib` MiB of one JSON string.
- `endless-error`: the manifest answers 404 with a `flood_mib` MiB body.
- `huge-signature`: the component is good; its signature tag names a
  256-byte simple-signing payload whose blob streams `flood_mib` MiB.
- `flaky-sig-500`, `flaky-sig-reset`: the component is good; its signature
  tag answers 500, or the connection is closed without an answer.
- `missing`: every manifest answers 404 (MANIFEST_UNKNOWN).

With `token_flood`, `GET /v2/` answers 401 with a Bearer challenge whose
realm (`/token` here) streams `flood_mib` MiB.

`hooks[repository]` is called (with the request's path) before a manifest
of that repository is answered: a test does something at a known point of
a pull. `written[repository]` counts the bytes a flood got to write before
the client hung up. Used by tests/test_oci_hostile.py and
scripts/abuse_registry.py.
"""

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
WASM_CONFIG = "application/vnd.wasm.config.v0+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
CHUNK = b"a" * (1 << 20)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class HostileRegistry:
    def __init__(self, component: bytes, flood_mib: int = 512, token_flood: bool = False):
        self.flood = flood_mib << 20
        self.token_flood = token_flood
        self.hooks = {}
        self.written = {}
        self.blobs = {}
        self.config = b'{"architecture":"wasm","os":"wasip2"}'
        self.blobs[sha256(self.config)] = self.config
        self.layer = sha256(component)
        self.blobs[self.layer] = component
        self.good = self.manifest(self.layer, len(component))
        # A layer declared as 8 bytes (the digest of 8 real ones).
        self.small = self.manifest(sha256(b"\0asm\x0d\0\x01\0"), 8)
        payload = b"p" * 256
        self.payload = sha256(payload)
        sig_config = b"{}"
        self.blobs[sha256(sig_config)] = sig_config
        self.signature = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha256(sig_config), "size": len(sig_config)},
            "layers": [{"mediaType": SIMPLE_SIGNING, "digest": self.payload, "size": len(payload),
                        "annotations": {"dev.cosignproject.cosign/signature":
                                        base64.b64encode(b"not a signature").decode()}}],
        }).encode()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                try:
                    registry.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def manifest(self, layer: str, size: int) -> bytes:
        return json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": WASM_CONFIG, "digest": sha256(self.config),
                       "size": len(self.config)},
            "layers": [{"mediaType": "application/wasm", "digest": layer, "size": size}],
        }).encode()

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def ref(self, repository: str) -> str:
        return f"oci://{self.host}/{repository}:1.0"

    # ---------------------------------------------------------------- answers

    def answer(self, h):
        path = h.path.split("?")[0]
        if path in ("/v2/", "/v2"):
            if self.token_flood:
                return self.send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', headers={
                    "WWW-Authenticate": f'Bearer realm="http://{self.host}/token",service="hostile"'})
            return self.send(h, 200, b"{}")
        if path == "/token":
            return self.stream(h, 200, "token", b'{"token":"')
        m = re.fullmatch(r"/v2/(.+)/(manifests|blobs)/([^/]+)", path)
        if not m:
            return self.send(h, 404, b"{}")
        repo, kind, ref = m.groups()
        if kind == "manifests":
            if hook := self.hooks.get(repo):
                hook(path)
            return self.answer_manifest(h, repo, ref)
        return self.answer_blob(h, repo, ref)

    def answer_manifest(self, h, repo, ref):
        unknown = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'
        if ref.endswith(".sig"):
            if repo == "huge-signature":
                return self.send(h, 200, self.signature, OCI_MANIFEST)
            if repo == "flaky-sig-500":
                return self.send(h, 500, b"internal error")
            if repo == "flaky-sig-reset":
                h.close_connection = True
                h.connection.shutdown(2)
                return None
            return self.send(h, 404, unknown)
        if repo == "missing":
            return self.send(h, 404, unknown)
        if repo == "endless-manifest":
            return self.stream(h, 200, repo, b'{"schemaVersion":2,"annotations":{"x":"',
                               OCI_MANIFEST)
        if repo == "endless-error":
            return self.stream(h, 404, repo, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"')
        body = self.small if repo == "oversized-blob" else self.good
        if ref.startswith("sha256:") and ref != sha256(body):
            return self.send(h, 404, unknown)
        return self.send(h, 200, body, OCI_MANIFEST, {"Docker-Content-Digest": sha256(body)})

    def answer_blob(self, h, repo, digest):
        if repo == "oversized-blob" and digest != sha256(self.config):
            return self.stream(h, 200, repo, b"\0asm\x0d\0\x01\0")
        if repo == "huge-signature" and digest == self.payload:
            return self.stream(h, 200, repo, b"")
        if digest in self.blobs:
            return self.send(h, 200, self.blobs[digest], "application/octet-stream")
        return self.send(h, 404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')

    def send(self, h, status, body, content_type="application/json", headers=None):
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def stream(self, h, status, name, head, content_type="application/octet-stream"):
        """`head`, then `flood` bytes of `a`, chunked with no length: the
        client must stop reading on its own."""
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        self.written[name] = 0
        h.close_connection = True
        sent = 0
        for piece in [head] + [CHUNK] * (self.flood // len(CHUNK)):
            if not piece:
                continue
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
            self.written[name] = sent
        h.wfile.write(b"0\r\n\r\n")
