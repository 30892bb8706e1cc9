"""Real clients nobody here wrote: the official Python MCP SDK and the
official MCP conformance suite (run on Node 22)."""

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def server(start_server):
    # A cache of its own: the kv store lives there, and the diagnostic tools
    # test_trigger_tool_change / test_trigger_prompt_change flip the everything
    # plugin's lists in it, which servers sharing the cache would see.
    return start_server(plugins=("echo", "everything"), cache=False)


def test_python_sdk_lists_calls_and_sees_tool_errors(server):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def run():
        async with streamablehttp_client(server.url + "/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.serverInfo.name == "hangar"
                tools = await session.list_tools()
                names = {t.name for t in tools.tools}
                assert {"echo", "test_simple_text", "test_error_handling"} <= names
                echo = await session.call_tool("echo", {"text": "sdk", "times": 2})
                assert echo.isError is False
                assert echo.content[0].text == "sdk sdk"
                err = await session.call_tool("test_error_handling", {})
                assert err.isError is True
                assert "intentionally" in err.content[0].text
                image = await session.call_tool("test_image_content", {})
                assert image.content[0].type == "image" and image.content[0].mimeType == "image/png"

    asyncio.run(run())


CONFORMANCE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance"
REVISIONS = {"2025-11-25": 30, "2026-07-28": 37}  # revision: how many server scenarios it scores

# Scored scenarios Hangar does not pass yet, and why: (revision, scenario) → reason. Strict:
# one that starts passing fails here, so this list cannot go stale. Empty: all pass.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def scored_server_scenarios(revision: str) -> list[str]:
    """The server scenarios the suite scores for the revision (its requirements file)."""
    lines = (CONFORMANCE / "requirements" / f"{revision}.yaml").read_text().splitlines()
    start = lines.index("server:") + 1
    names = []
    for line in lines[start:]:
        if not line.startswith("  - "):
            break
        names.append(line[4:].strip())
    return names


ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def conformance_results(server, tmp_path_factory):
    """One run of the suite's scored requirements per revision; results by scenario, read from
    its saved files (the CLI exits 0 when checks only warn, so the exit code alone proves nothing)."""
    bin_dir = HERE / "node_modules" / ".bin"
    assert (bin_dir / "conformance").exists(), "scripts/test installs the conformance suite"
    # node_modules/.bin first: the suite runs on the Node 22 from the npm package.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    assert "v22." in subprocess.run([shutil.which("node", path=env["PATH"]), "--version"],
                                    capture_output=True, text=True, env=env).stdout
    runs = {}

    def run(revision):
        if revision not in runs:
            out_dir = tmp_path_factory.mktemp("conformance")
            out = subprocess.run(
                ["conformance", "server", "--url", server.url + "/mcp", "--requirements", revision,
                 "-o", str(out_dir)],
                capture_output=True, text=True, env=env, timeout=600, cwd=HERE,
                stdin=subprocess.DEVNULL,
            )
            text = ANSI.sub("", out.stdout + out.stderr)
            results = {}
            for checks in out_dir.glob("*/checks.json"):
                scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
                results[scenario] = json.loads(checks.read_text())
            runs[revision] = (results, text)
        return runs[revision]

    return run


@pytest.mark.parametrize("revision", REVISIONS)
def test_conformance_runs_every_scored_scenario(conformance_results, revision):
    results, text = conformance_results(revision)
    missing = [s for s in scored_server_scenarios(revision) if s not in results]
    assert len(scored_server_scenarios(revision)) == REVISIONS[revision]
    assert not missing, f"no results for {missing}:\n{text[-3000:]}"


@pytest.mark.parametrize("revision,scenario", [
    pytest.param(r, s, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(r, s)])]
                 if (r, s) in KNOWN_GAPS else [])
    for r in REVISIONS for s in scored_server_scenarios(r)
])
def test_conformance(conformance_results, revision, scenario):
    """Passes only with no failed and no warning check (skipped checks are neither)."""
    results, text = conformance_results(revision)
    checks = results.get(scenario)
    assert checks, f"{scenario}: no saved results\n{text[-3000:]}"
    bad = [(c["id"], c["status"], c.get("errorMessage")) for c in checks
           if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")]
    assert not bad, f"{scenario}: {bad}"
    assert any(c["status"] == "SUCCESS" for c in checks)


# The tasks extension's scenarios: not scored by the suite (an extension), run here against a
# server whose [[tools]] make the suite's fixtures tasks. tasks-status-notifications is left
# out: in this suite version it only reports SKIPPED (test_mcp_tasks.py checks notifications).
TASK_SCENARIOS = ["tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
                  "tasks-request-state-removal", "tasks-mrtr-input", "tasks-request-headers",
                  "tasks-dispatch-and-envelope", "tasks-required-task-error",
                  "tasks-mrtr-composition"]
TASK_GAPS = {
    # A guest's questions block one at a time, so no tool can have two pending at once.
    "tasks-mrtr-input": "no two questions of one task wait at once (multi_input)",
    # An input-required round that turns into a task on its last round is not built.
    "tasks-mrtr-composition": "no input-required round escalates to a task (test_tool_with_task)",
}
TASKS_CONFIG = """
[[tools]]
name = "slow_compute"
task = "optional"
limits = { deadline = "90s" }

[[tools]]
name = "failing_job"
task = "required"

[[tools]]
name = "protocol_error_job"
task = "optional"

[[tools]]
name = "confirm_delete"
task = "optional"
limits = { deadline = "60s" }
"""


@pytest.fixture(scope="module")
def tasks_server(start_server):
    return start_server(plugins=("echo", "everything"), config=TASKS_CONFIG, cache=False)


@pytest.mark.parametrize("scenario", [
    pytest.param(s, marks=[pytest.mark.xfail(strict=True, reason=TASK_GAPS[s])] if s in TASK_GAPS else [])
    for s in TASK_SCENARIOS
])
def test_conformance_tasks_extension(tasks_server, tmp_path, scenario):
    bin_dir = HERE / "node_modules" / ".bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    out = subprocess.run(
        ["conformance", "server", "--url", tasks_server.url + "/mcp", "--scenario", scenario,
         "-o", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300, cwd=HERE, stdin=subprocess.DEVNULL)
    saved = list(tmp_path.glob("*/checks.json"))
    assert saved, ANSI.sub("", out.stdout + out.stderr)[-3000:]
    checks = json.loads(saved[0].read_text())
    bad = [(c["id"], c["status"], c.get("errorMessage")) for c in checks
           if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")]
    assert not bad, f"{scenario}: {bad}"
    assert any(c["status"] == "SUCCESS" for c in checks)


SDK2_PYTHON = HERE / ".venv-mcp2" / "bin" / "python"


@pytest.mark.parametrize("mode,protocol", [
    ("legacy", "2025-11-25"),
    ("auto", "2026-07-28"),
    ("2026-07-28", "2026-07-28"),
])
def test_python_sdk_2_calls_tools_reads_resources_and_answers_an_elicitation(server, mode, protocol):
    """The official Python SDK 2.x, from its own virtualenv (scripts/test makes it): with the
    2025 handshake, in auto mode (it discovers 2026-07-28), and pinned to 2026-07-28, where
    the elicitation is an input-required round. It lists and calls tools, reads resources,
    gets prompts and completions, and answers the elicitation."""
    assert SDK2_PYTHON.exists(), "scripts/test installs mcp 2.x into tests/.venv-mcp2"
    version = subprocess.run([str(SDK2_PYTHON), "-c", "import mcp, importlib.metadata as m; print(m.version('mcp'))"],
                             capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("2."), version
    out = subprocess.run([str(SDK2_PYTHON), str(HERE / "clients" / "sdk2_offers.py"), server.url + "/mcp", mode],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout)
    assert seen["protocol"] == protocol
    assert {"echo", "test_elicitation"} <= set(seen["tools"])
    assert seen["echo"] == ["sdk2 sdk2", False]
    assert "test://static-text" in seen["resources"]
    assert seen["templates"] == ["test://template/{id}/data"]
    assert seen["text"] == "This is the content of the static text resource."
    assert seen["templated"] == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}
    assert "test_prompt_with_arguments" in seen["prompts"]
    assert seen["prompt"] == "Prompt with arguments: arg1='a', arg2='b'"
    assert seen["completion"] == ["paris", "park", "party"]
    assert seen["elicited_error"] is False
    assert '"username":"sdk2"' in seen["elicited"] and '"seen":"email,username"' in seen["elicited"]
