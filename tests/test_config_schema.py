"""`hangar config --schema`: the JSON Schema of hangar.toml. The shipped
configs are valid against it, and what Hangar refuses (an unknown key, a
credential of an unknown kind, a connector missing its path) is invalid."""

import json
import tomllib

import jsonschema
import pytest

from conftest import ROOT, run_hangar


@pytest.fixture(scope="module")
def validator():
    out = run_hangar("config", "--schema")
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def errors(validator, config: dict) -> list[str]:
    return [e.message for e in validator.iter_errors(config)]


@pytest.mark.parametrize("path", ["hangar.toml", "examples/postgres.toml"])
def test_shipped_configs_are_valid(validator, path):
    config = tomllib.loads((ROOT / path).read_text())
    assert errors(validator, config) == []


def test_an_empty_config_is_valid(validator):
    assert errors(validator, {}) == []


def test_unknown_keys_are_invalid_at_every_level(validator):
    for config in [
        {"sever": {}},
        {"limits": {"fule": 3}},
        {"plugins": {"echo": {"limits": {"deadlin": "1s"}}}},
        {"tools": [{"name": "t", "inputs": {"id": {"type": "integer", "requird": True}}}]},
    ]:
        found = errors(validator, config)
        assert any("Additional properties are not allowed" in e for e in found), (config, found)


def test_tagged_enums_check_their_variant(validator):
    ok = {
        "credentials": {
            "gh": {"kind": "static", "value": "{{ env.GITHUB_TOKEN }}"},
            "t": {"kind": "oauth2-client-credentials", "token_url": "https://a/token",
                  "client_id": "c", "client_secret": "s", "scopes": ["x"]},
        },
        "connectors": {
            "pg": {"kind": "postgres", "url": "postgres://h/db", "sslmode": "require"},
            "lite": {"kind": "sqlite", "path": "demo.db", "busy_timeout_ms": 100},
        },
    }
    assert errors(validator, ok) == []
    for bad in [
        {"credentials": {"gh": {"kind": "token", "value": "x"}}},
        # A static credential has no client_id.
        {"credentials": {"gh": {"kind": "static", "value": "x", "client_id": "c"}}},
        {"connectors": {"lite": {"kind": "sqlite"}}},
        # busy_timeout_ms is SQLite's.
        {"connectors": {"pg": {"kind": "postgres", "url": "u", "busy_timeout_ms": 1}}},
    ]:
        assert errors(validator, bad), bad


def test_durations_rates_and_defaults(validator):
    assert errors(validator, {"limits": {"deadline": "250ms"}, "server": {"rate_limit": "5/s"}}) == []
    assert errors(validator, {"limits": {"deadline": 5}})
    assert errors(validator, {"server": {"rate_limit": "5/h"}})
    limits = validator.schema["$defs"]["Limits"]["properties"]
    assert limits["deadline"]["default"] == "5s"
    assert limits["fuel"]["default"] == 1_000_000_000


def test_config_needs_schema_flag():
    out = run_hangar("config")
    assert out.returncode != 0
    assert "--schema" in out.stderr
