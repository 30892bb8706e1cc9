"""The REST surface for resources and prompts: GET /resources,
GET /resources/read?uri=…, GET /prompts, POST /prompts/{name}/get; their
errors, per-principal visibility, and their OpenAPI description."""

import base64
import json

import httpx
import pytest

STATIC_TEXT = "This is the content of the static text resource."

OFFER_PATHS = {"/resources", "/resources/read", "/prompts", "/prompts/{name}/get"}

# Where the everything plugin's entries come from, as the listings say it.
EVERYTHING = {"kind": "component", "name": "everything", "language": "rust"}



@pytest.fixture(scope="module")
def server(start_server):
    return start_server(plugins=("everything",))


def read(server, uri, headers=None):
    return httpx.get(server.url + "/resources/read", params={"uri": uri}, headers=headers)


def get_prompt(server, name, arguments=None, headers=None):
    return httpx.post(f"{server.url}/prompts/{name}/get", json=arguments, headers=headers)


def test_resources_and_templates_are_listed(server):
    body = httpx.get(server.url + "/resources").json()
    assert set(body) == {"resources", "resourceTemplates"}
    assert [r["uri"] for r in body["resources"]] == [
        "test://static-text", "test://static-binary", "test://watched-resource"]
    # MCP's shapes, and the plugin that serves each (which the explorer reads).
    assert body["resources"][0] == {"uri": "test://static-text", "name": "static-text",
                                    "description": "A static text resource", "mimeType": "text/plain",
                                    "plugin": {"name": "everything"}, "source": EVERYTHING}
    assert body["resourceTemplates"] == [{"uriTemplate": "test://template/{id}/data", "name": "template-data",
                                          "description": "Data for any id", "mimeType": "application/json",
                                          "plugin": {"name": "everything"}, "source": EVERYTHING}]


def test_read_a_text_resource(server):
    r = read(server, "test://static-text")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain", "text": STATIC_TEXT}]
    assert len(body["_meta"]["_trace_id"]) == 32


def test_read_a_binary_resource(server):
    [blob] = read(server, "test://static-binary").json()["contents"]
    assert blob["mimeType"] == "image/png" and "text" not in blob
    assert base64.b64decode(blob["blob"]).startswith(b"\x89PNG\r\n")


def test_read_through_a_template(server):
    [item] = read(server, "test://template/42/data").json()["contents"]
    assert item["uri"] == "test://template/42/data"
    assert json.loads(item["text"]) == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}


def test_unknown_resource_is_404(server):
    for uri in ("test://nope", "test://template/a/b/data"):
        r = read(server, uri)
        assert r.status_code == 404 and r.json() == {"error": f"Resource not found: {uri}"}


def test_missing_uri_is_400(server):
    for query in ("", "?uri=", "?url=test://static-text"):
        r = httpx.get(server.url + "/resources/read" + query)
        assert r.status_code == 400 and r.json() == {"error": "the uri query parameter is required"}


def test_prompts_are_listed(server):
    prompts = httpx.get(server.url + "/prompts").json()["prompts"]
    assert [p["name"] for p in prompts] == [
        "test_simple_prompt", "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource", "test_prompt_with_image",
        "test_input_required_result_prompt"]
    assert prompts[1]["arguments"] == [
        {"name": "arg1", "description": "First test argument", "required": True},
        {"name": "arg2", "description": "Second test argument", "required": True}]


def test_get_a_prompt_with_arguments(server):
    r = get_prompt(server, "test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    assert r.status_code == 200
    body = r.json()
    assert body["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Prompt with arguments: arg1='a', arg2='b'"}}]
    assert len(body["_meta"]["_trace_id"]) == 32


def test_a_prompt_without_arguments_takes_no_body(server):
    r = httpx.post(server.url + "/prompts/test_simple_prompt/get")
    assert r.status_code == 200
    assert r.json()["messages"][0]["content"]["text"] == "This is a simple prompt for testing."


def test_prompt_messages_carry_images_and_resources(server):
    messages = get_prompt(server, "test_prompt_with_image").json()["messages"]
    assert messages[0]["content"]["type"] == "image" and messages[0]["content"]["mimeType"] == "image/png"
    messages = get_prompt(server, "test_prompt_with_embedded_resource", {"resourceUri": "test://x"}).json()["messages"]
    assert messages[0]["content"]["resource"]["uri"] == "test://x"


def test_missing_required_argument_is_400(server):
    r = get_prompt(server, "test_prompt_with_arguments", {"arg1": "a"})
    assert r.status_code == 400 and r.json() == {"error": 'validate: missing required argument "arg2"'}


def test_non_string_argument_is_400(server):
    r = get_prompt(server, "test_prompt_with_arguments", {"arg1": "a", "arg2": 2})
    assert r.status_code == 400 and r.json() == {"error": 'validate: argument "arg2" must be a string'}


def test_body_that_is_not_an_object_is_400(server):
    for body in (b"[1]", b"{oops", b'"a"'):
        r = httpx.post(server.url + "/prompts/test_simple_prompt/get", content=body,
                       headers={"content-type": "application/json"})
        assert r.status_code == 400
        assert r.json() == {"error": "the body must be a JSON object of string arguments"}


def test_unknown_prompt_is_404(server):
    r = get_prompt(server, "nope", {})
    assert r.status_code == 404 and r.json() == {"error": "Prompt not found: nope"}


VISIBILITY = """
[plugins.api-key]
config = { keys = "admin=admin-key,user=user-key" }

[auth]
plugin = "api-key"

[[resources]]
uri = "test://static-text"
visible_to = { sub = ["admin"] }

[[prompts]]
name = "test_simple_prompt"
visible_to = { sub = ["admin"] }
"""


def test_visible_to_hides_resources_and_prompts_like_unknown_ones(start_server):
    s = start_server(plugins=("everything", "api-key"), config=VISIBILITY)
    admin, user, nobody = {"x-api-key": "admin-key"}, {"x-api-key": "user-key"}, {}
    for who, sees in ((admin, True), (user, False), (nobody, False)):
        listed = [r["uri"] for r in httpx.get(s.url + "/resources", headers=who).json()["resources"]]
        assert ("test://static-text" in listed) is sees and "test://static-binary" in listed
        listed = [p["name"] for p in httpx.get(s.url + "/prompts", headers=who).json()["prompts"]]
        assert ("test_simple_prompt" in listed) is sees and "test_prompt_with_image" in listed

        r = read(s, "test://static-text", headers=who)
        if sees:
            assert r.status_code == 200 and r.json()["contents"][0]["text"] == STATIC_TEXT
        else:
            assert r.status_code == 404 and r.json() == {"error": "Resource not found: test://static-text"}
        r = get_prompt(s, "test_simple_prompt", headers=who)
        if sees:
            assert r.status_code == 200
        else:
            assert r.status_code == 404 and r.json() == {"error": "Prompt not found: test_simple_prompt"}

    # What is not hidden still goes through the server-wide auth check.
    assert read(s, "test://static-binary", headers=user).status_code == 200
    for r in (read(s, "test://static-binary"), get_prompt(s, "test_prompt_with_image")):
        assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}


def test_openapi_describes_the_routes_and_their_answers(server):
    from openapi_schema_validator import OAS31Validator
    from openapi_spec_validator import validate

    doc = httpx.get(server.url + "/openapi.json").json()
    validate(doc)
    assert OFFER_PATHS <= set(doc["paths"])
    read_op = doc["paths"]["/resources/read"]["get"]
    assert read_op["parameters"][0]["name"] == "uri" and read_op["parameters"][0]["required"] is True
    assert set(read_op["responses"]) == {"200", "400", "401", "404", "500", "503"}
    get_op = doc["paths"]["/prompts/{name}/get"]["post"]
    assert set(get_op["responses"]) == {"200", "400", "401", "404", "500", "503"}

    # The real answers match the schemas the document gives them.
    def check(response, path, method, status):
        ref = doc["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]["$ref"]
        schema = {"$ref": ref, "components": doc["components"]}
        assert response.status_code == status
        OAS31Validator(schema).validate(response.json())

    check(httpx.get(server.url + "/resources"), "/resources", "get", 200)
    check(read(server, "test://static-binary"), "/resources/read", "get", 200)
    check(read(server, "test://nope"), "/resources/read", "get", 404)
    check(httpx.get(server.url + "/resources/read"), "/resources/read", "get", 400)
    check(httpx.get(server.url + "/prompts"), "/prompts", "get", 200)
    check(get_prompt(server, "test_prompt_with_embedded_resource", {"resourceUri": "test://x"}),
          "/prompts/{name}/get", "post", 200)
    check(get_prompt(server, "test_prompt_with_arguments", {}), "/prompts/{name}/get", "post", 400)
