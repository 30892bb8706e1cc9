"""What a hostile registry can make Hangar do while it pulls (issue 61):
server I has one `[plugins.evil] source = "oci://…"` on
tests/hostile_registry.py (a small HTTP server speaking just enough of the
OCI distribution API), which answers each pull with a flood of 512 MiB,
chunked with no length:

- a layer declared as 8 bytes whose blob never stops;
- a manifest that never ends (one JSON string);
- a 404 whose error body never ends;
- a signature payload declared as 256 bytes that never stops
  (`[trust] require = "signed"`);
- a `/v2/` Bearer challenge whose token realm never stops answering.

Each is pulled at start-up (`hangar serve` pulls before it listens) in
`RUNS` fresh servers. Figures: peak RSS (VmHWM) against a server with the
same config and no source (the goal: + < 64 MiB), what the registry got to
write before Hangar hung up, and whether the plugin was refused with one
problem naming it.

Run by scripts/abuse (`--only registry`); `rows()` gives its section of
RELIABILITY.md.
"""

import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path

from abuse import ROOT, Server, log, rss_kib

sys.path.insert(0, str(ROOT / "tests"))
from hostile_registry import HostileRegistry  # noqa: E402 - needs tests/ on the path

FLOOD_MIB = 512
RUNS = 3
GOAL_MIB = 64

ATTACKS = [
    # (key, repository, token flood, needs a signature, what the row says)
    ("blob", "oversized-blob", False, False, "a layer declared as 8 bytes whose blob never stops"),
    ("manifest", "endless-manifest", False, False, "a manifest that never ends"),
    ("error", "endless-error", False, False, "a 404 whose error body never ends"),
    ("signature", "huge-signature", False, True,
     "a signature payload declared as 256 bytes that never stops (`require = \"signed\"`)"),
    ("token", "good", True, False, "a Bearer challenge whose token answer never ends"),
]


def public_key(work: Path) -> Path:
    key, pub = work / "registry-team.key", work / "registry-team.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", key], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True,
                   capture_output=True)
    return pub


def problems(url):
    with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
        return json.loads(r.read()).get("problems", [])


def peak_mib(server, name, config):
    """Starts a server on `config`, returns (its VmHWM in MiB once up, its problems)."""
    with Server(name, server["work"], server["plugins"], config) as s:
        return rss_kib(s.pid, "VmHWM") / 1024, problems(s.url)


def run(work, plugins, seconds):  # noqa: ARG001 - the common signature of a topic module
    """Pulls each attack in RUNS fresh servers; returns the figures."""
    component = (ROOT / "plugins/echo.wasm").read_bytes()
    empty = work / "registry-plugins"
    empty.mkdir(exist_ok=True)
    where = {"work": work, "plugins": empty}
    trust = f'[trust]\nkeys = ["{public_key(work)}"]\nrequire = "signed"\n'
    results = {}
    for key, repo, token, signed, _ in ATTACKS:
        registry = HostileRegistry(component, FLOOD_MIB, token_flood=token).start()
        try:
            base = f'[registries]\ninsecure = ["{registry.host}"]\n' + (trust if signed else "")
            ref = registry.ref(repo)
            calm = [peak_mib(where, f"registry-calm-{key}", base)[0] for _ in range(RUNS)]
            growth, written, refusals = [], [], []
            for i in range(RUNS):
                log(f"hostile registry: {key}, run {i + 1} of {RUNS}")
                peak, found = peak_mib(where, f"registry-{key}", base + f'[plugins.evil]\nsource = "{ref}"\n')
                growth.append(peak - statistics.median(calm))
                written.append(registry.written.get(repo if not token else "token", 0) / (1 << 20))
                refusals.append(found)
        finally:
            registry.stop()
        one = all(len(f) == 1 and '"evil"' in f[0]["error"] and f[0]["path"] == ref for f in refusals)
        results[key] = {"calm": calm, "growth": growth, "written": written, "one_problem": one,
                        "problem": refusals[-1][0]["error"] if refusals[-1] else "(none)"}
    # For reference: what any pull costs (a well-behaved one, served).
    registry = HostileRegistry(component, FLOOD_MIB).start()
    try:
        config = f'[registries]\ninsecure = ["{registry.host}"]\n'
        calm = [peak_mib(where, "registry-calm", config)[0] for _ in range(RUNS)]
        config += f'[plugins.evil]\nsource = "{registry.ref("good")}"\n'
        log("hostile registry: a well-behaved pull, for reference")
        good = [peak_mib(where, "registry-good", config) for _ in range(RUNS)]
        results["good"] = {"calm": calm, "growth": [p - statistics.median(calm) for p, _ in good],
                           "served": all(not found for _, found in good)}
    finally:
        registry.stop()
    return results


def yes(ok):
    return "yes" if ok else "**NO**"


def spread(values, unit=" MiB", sign="+"):
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{sign}{mid:.1f}{unit} ({sign}{lo:.1f}–{sign}{hi:.1f})"


def rows(r, seconds):  # noqa: ARG001 - the common signature of a topic module
    out = [
        "", "## A hostile registry (issue 61)", "",
        "| figure | goal | measured: median (min–max) of "
        f"{RUNS} pulls | met? |", "|---|---|---|---|",
    ]
    for key, _, _, _, what in ATTACKS:
        f = r[key]
        problem = f["problem"].split(": ", 1)[-1][:110]
        out.append(
            f"| {what}: peak RSS growth; what the registry wrote before Hangar hung up | < {GOAL_MIB} MiB; "
            f"< {GOAL_MIB} MiB | {spread(f['growth'])}; {spread(f['written'], sign='')} | "
            f"{yes(max(f['growth']) < GOAL_MIB and max(f['written']) < GOAL_MIB)} |")
        out.append(
            f"| the same: the plugin refused, one problem naming it | yes | `{problem}` | "
            f"{yes(f['one_problem'])} |")
    g = r["good"]
    out.append(
        f"| for reference, a well-behaved pull of the echo component (served): peak RSS growth | — | "
        f"{spread(g['growth'])}{'' if g['served'] else ' (**not served**)'} | — |")
    calm = [v for k in [*(a[0] for a in ATTACKS), "good"] for v in r[k]["calm"]]
    out += [
        "", "### How each figure was measured", "",
        f"**Server I** (`scripts/abuse_registry.py`) is a fresh `hangar serve` per pull with one `[plugins.evil] "
        f"source` on `tests/hostile_registry.py`, which floods {FLOOD_MIB} MiB (chunked, no length) at the point "
        "each row names. Hangar pulls at start-up, before it listens, so the kernel's peak RSS (VmHWM) read once "
        "`/healthz` answers covers the whole pull. Growth is that peak minus the median peak of "
        f"{RUNS} servers with the same config and no source (VmHWM {min(calm):.1f}–{max(calm):.1f} MiB). What "
        "the registry wrote is counted as its writes complete: the kernel's socket buffers hold a few MiB of "
        "it after Hangar stopped reading.",
    ]
    return out


if __name__ == "__main__":
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="hangar-abuse-registry-"))
    print("\n".join(rows(run(work, ROOT / "plugins", 5), 5)))
