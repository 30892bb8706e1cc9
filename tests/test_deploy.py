"""What ships for deploying: the Kubernetes manifests in deploy/kubernetes and
server.json, the MCP registry's entry. No cluster runs here (the podman
cluster of tests/test_image.py runs the same hangar.toml); what the tests
hold the files to:

* every manifest is valid against the Kubernetes API's schemas of a pinned
  version, strictly (an unknown field fails, as a typo would), and a
  manifest with an unknown field or a wrong type is refused;
* kustomization.yaml lists every manifest, and the objects name each other
  consistently (Service, HPA and PDB select the Deployment's pods);
* the Deployment probes `/livez` and `/readyz`, runs as uid 10001 with a
  read-only root filesystem, no privilege escalation and no capabilities,
  mounts the ConfigMap as a directory at /etc/hangar (never with subPath,
  which never updates, so a reload would never happen) and an emptyDir at
  the cache;
* the environment variables the ConfigMap's hangar.toml reads through
  `{{ env.VAR }}` are the ones the Deployment sets (the signing key from the
  Secret, whose example holds only a placeholder; the Redis URL naming the
  Redis Service);
* `hangar check` loads that hangar.toml with the plugins it names;
* server.json is valid against the registry's published schema (a pinned
  copy), names only fields the schema knows, and carries the workspace's
  version.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import HANGAR_BIN, REDIS_URL, ROOT, plugin_path

MANIFESTS = ROOT / "deploy" / "kubernetes"
K8S_VERSION = "1.34.0"
SERVER_JSON = ROOT / "server.json"
SERVER_SCHEMA = ROOT / "tests" / "data" / "server.schema.json"
# https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json
SERVER_SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
# Registries the MCP registry takes OCI packages from.
OCI_REGISTRIES = ("docker.io/", "ghcr.io/", "quay.io/", "mcr.microsoft.com/")
ENV_TEMPLATE = re.compile(r"\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# Hangar's own variables, which configure it without a template.
HANGAR_VARS = {"HANGAR_CONFIG", "HANGAR_LISTEN", "HANGAR_PLUGINS"}


def manifest_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def documents() -> list[tuple[str, dict]]:
    """Every object of every manifest, as (file name, object)."""
    return [(p.name, doc) for p in manifest_files()
            for doc in yaml.safe_load_all(p.read_text()) if doc is not None]


def find(kind: str, name: str) -> dict:
    found = [d for _, d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def configmap_hangar_toml() -> str:
    """The hangar.toml the ConfigMap holds: what every replica runs."""
    return find("ConfigMap", "hangar-config")["data"]["hangar.toml"]


def hangar_container() -> dict:
    (container,) = [c for c in find("Deployment", "hangar")["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "hangar"]
    return container


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("name,doc", documents(),
                         ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in documents()])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(name, doc):
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.34"


@pytest.mark.parametrize("break_it", [
    lambda d: d["spec"]["template"]["spec"].__setitem__("bogusField", 1),
    lambda d: hangar_of(d)["securityContext"].__setitem__("readOnlyRootFileSystem", True),
    lambda d: hangar_of(d)["securityContext"].__setitem__("runAsUser", "10001"),
    lambda d: hangar_of(d)["livenessProbe"]["httpGet"].__setitem__("port", [8080]),
], ids=["unknown-field", "misspelt-field", "string-for-integer", "list-for-port"])
def test_a_broken_manifest_is_refused(break_it):
    doc = find("Deployment", "hangar")
    break_it(doc)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def hangar_of(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and k["kind"] == "Kustomization"
    assert sorted(k["resources"]) == [p.name for p in manifest_files()]


def test_the_objects_select_the_hangar_pods():
    deployment = find("Deployment", "hangar")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service = find("Service", "hangar")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert find("PodDisruptionBudget", "hangar")["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # The Redis pods are not Hangar's.
    redis_labels = find("Deployment", "hangar-redis")["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= redis_labels.items()
    hpa = find("HorizontalPodAutoscaler", "hangar")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "hangar"}
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    pdb = find("PodDisruptionBudget", "hangar")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"].get("maxUnavailable") == 1 or pdb["spec"].get("minAvailable") == 2


def test_the_service_reaches_port_8080():
    (port,) = find("Service", "hangar")["spec"]["ports"]
    assert port["port"] == 80
    container_ports = {p["name"]: p["containerPort"] for p in hangar_container()["ports"]}
    assert container_ports[port["targetPort"]] == 8080


def test_the_deployment_probes_livez_and_readyz():
    deployment = find("Deployment", "hangar")
    assert deployment["spec"]["replicas"] == 3
    c = hangar_container()
    assert c["image"] == "hangar:0.1.0"
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        port = c[probe]["httpGet"]["port"]
        assert port in ("http", 8080), probe
    assert set(c["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) & set(c["resources"]["limits"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 10


def test_the_deployment_runs_locked_down():
    pod = find("Deployment", "hangar")["spec"]["template"]["spec"]
    sc = hangar_container()["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["runAsNonRoot"] is True and pod["securityContext"]["runAsNonRoot"] is True
    assert sc["runAsUser"] == 10001 and pod["securityContext"]["runAsUser"] == 10001
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc.get("seccompProfile", {"type": "RuntimeDefault"}) == {"type": "RuntimeDefault"}


def test_the_configmap_is_mounted_as_a_directory():
    pod = find("Deployment", "hangar")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in hangar_container()["volumeMounts"]}
    # subPath mounts never see a ConfigMap's update: none at all.
    assert not [m for m in mounts.values() if "subPath" in m or "subPathExpr" in m]
    config = volumes[mounts["/etc/hangar"]["name"]]
    assert config["configMap"]["name"] == "hangar-config"
    assert "items" not in config["configMap"]          # the whole map: hangar.toml by its key
    config_path = env_of(hangar_container()).get("HANGAR_CONFIG", {}).get("value", "/etc/hangar/hangar.toml")
    assert config_path == "/etc/hangar/hangar.toml"
    assert "emptyDir" in volumes[mounts["/var/cache/hangar"]["name"]]


def test_the_config_reads_what_the_deployment_sets():
    toml = configmap_hangar_toml()
    templates = set(ENV_TEMPLATE.findall(toml))
    assert templates == {"HANGAR_REDIS_URL", "HANGAR_SIGNING_KEY"}
    env = env_of(hangar_container())
    assert set(env) - HANGAR_VARS == templates
    key = env["HANGAR_SIGNING_KEY"]["valueFrom"]["secretKeyRef"]
    secret = find("Secret", key["name"])
    assert key["key"] in secret["stringData"]
    # The example Secret holds a placeholder, never a key.
    assert "REPLACE-ME" in secret["stringData"][key["key"]]
    # The Redis URL names the Redis Service and its port.
    redis = find("Service", "hangar-redis")
    assert env["HANGAR_REDIS_URL"]["value"] == f"redis://{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}"


def test_the_config_is_for_a_container():
    config = tomllib.loads(configmap_hangar_toml())
    server = config["server"]
    assert server["cache_dir"] == "/var/cache/hangar"
    assert "listen" not in server and "plugins" not in server   # HANGAR_LISTEN, HANGAR_PLUGINS
    assert {"hangar", "hangar.default.svc", "hangar.default.svc.cluster.local"} <= set(server["allowed_hosts"])
    assert config["cluster"]["redis"] == "{{ env.HANGAR_REDIS_URL }}"
    assert config["kv"] == {"backend": "redis", "url": "{{ env.HANGAR_REDIS_URL }}"}
    assert config["artifacts"]["signing_key"] == "{{ env.HANGAR_SIGNING_KEY }}"
    assert config["plugins"]["csv-report"]["limits"] == {"deadline": "10s"}
    assert config["tools"] == [{"name": "echo", "limits": {"fuel": 100_000_000, "memory_mib": 16}}]


def check_configmap(tmp_path, cache: Path, env: dict) -> subprocess.CompletedProcess:
    """`hangar check` on the ConfigMap's hangar.toml, with the plugins it
    names and echo (the image's Python and JavaScript ones cost minutes of
    compiling; test_examples.py loads them all). The cache is `cache`
    instead of /var/cache/hangar (the container's volume): the one line
    changed."""
    toml = configmap_hangar_toml()
    line = 'cache_dir = "/var/cache/hangar"'
    assert toml.count(line) == 1
    config = tmp_path / "hangar.toml"
    config.write_text(toml.replace(line, f'cache_dir = "{cache}"'))
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for name in ("csv-report", "echo"):
        shutil.copy(plugin_path(name), plugins / f"{name}.wasm")
    base = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_")}
    return subprocess.run([str(HANGAR_BIN), "check", "--config", str(config), "--plugins", str(plugins)],
                          capture_output=True, text=True, timeout=600,
                          env={**base, "NO_COLOR": "1", **env})


def test_hangar_check_accepts_the_configmap(tmp_path, shared_cache):
    out = check_configmap(tmp_path, shared_cache, {"HANGAR_REDIS_URL": REDIS_URL,
                                                   "HANGAR_SIGNING_KEY": "0123456789abcdef0123"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert ", 0 problems" in out.stdout, out.stdout
    for tool in ("echo", "csv_report"):
        assert re.search(rf"^  tool  {tool} \(", out.stdout, re.M), out.stdout


def test_hangar_check_refuses_the_configmap_without_its_signing_key(tmp_path, shared_cache):
    out = check_configmap(tmp_path, shared_cache, {"HANGAR_REDIS_URL": REDIS_URL})
    assert out.returncode != 0
    assert "HANGAR_SIGNING_KEY" in out.stdout + out.stderr


@pytest.fixture(scope="module")
def server_schema() -> dict:
    raw = SERVER_SCHEMA.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SERVER_SCHEMA_SHA256, "not the published 2025-12-11 schema"
    return json.loads(raw)


def test_server_json_is_valid_against_the_registry_schema(server_schema):
    server = json.loads(SERVER_JSON.read_text())
    assert server["$schema"] == server_schema["$id"]
    cls = jsonschema.validators.validator_for(server_schema)
    cls.check_schema(server_schema)
    validator = cls(server_schema, format_checker=cls.FORMAT_CHECKER)
    assert [e.message for e in validator.iter_errors(server)] == []
    # The schema lets unknown fields through; a misspelt one would be lost.
    defs = server_schema["definitions"]
    assert set(server) <= set(defs["ServerDetail"]["properties"])
    for package in server["packages"]:
        assert set(package) <= set(defs["Package"]["properties"])


def test_server_json_describes_the_shipped_server(server_schema):
    server = json.loads(SERVER_JSON.read_text())
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    assert server["name"] == "dev.hangar/hangar"
    assert server["version"] == workspace
    (package,) = server["packages"]
    assert package["registryType"] == "oci"
    assert package["identifier"].startswith(OCI_REGISTRIES)
    assert package["identifier"].endswith(f"/hangar:{workspace}")
    assert package["transport"] == {"type": "streamable-http", "url": "http://localhost:8080/mcp"}


def test_a_broken_server_json_is_refused(server_schema):
    cls = jsonschema.validators.validator_for(server_schema)
    validator = cls(server_schema, format_checker=cls.FORMAT_CHECKER)
    server = json.loads(SERVER_JSON.read_text())
    for broken in ({**server, "name": "no-slash"},
                   {**server, "description": "x" * 101},
                   {**server, "packages": [{**server["packages"][0],
                                            "transport": {"type": "streamable-http", "url": "localhost:8080/mcp"}}]}):
        assert list(validator.iter_errors(broken)), broken
