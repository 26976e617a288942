"""The API's contract at its edges, on the real app (no workers needed): methods a
route does not take, unknown paths, out-of-range numbers, and what the OpenAPI schema
declares. The fuzzer in test_api_fuzz.py explores the rest."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.docintel import API_VERSION, PREFIX
from appliance.security import ApiKeys
from tests.conftest import make_settings
from tests.daemon import serving


@pytest.fixture
def client(tmp_path):
    appliance = Appliance(make_settings(tmp_path))
    yield TestClient(create_app(appliance))
    appliance.db.close()


@pytest.mark.parametrize("method, path, allowed", [
    ("TRACE", "/api/v1/documents", "GET, POST"),
    ("PATCH", "/api/v1/documents/abc", "DELETE, GET"),
    ("PUT", "/healthz", "GET"),
    ("TRACE", "/readyz", "GET"),
])
def test_a_method_a_route_does_not_take_is_405_with_allow(client, method, path, allowed):
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response.headers["Allow"] == allowed


def test_analyze_is_not_a_model_get_answers(client):
    """``{model_id}:analyze`` takes POST alone: GET's ``{model_id}`` is no id with a ``:``
    in it, as the service's ids never hold one (schemathesis found GET advertised)."""
    version = {"api-version": API_VERSION}
    analyze = client.options(PREFIX + "/documentModels/prebuilt-read:analyze", params=version)
    assert analyze.status_code == 405 and analyze.headers["Allow"] == "POST"
    assert analyze.json()["error"]["code"] == "MethodNotAllowed"
    model = client.get(PREFIX + "/documentModels/prebuilt-read", params=version)
    assert model.status_code == 200 and model.json()["modelId"] == "prebuilt-read"


def test_unknown_api_paths_are_404_json_not_the_web_ui(client):
    for method in ("GET", "POST", "TRACE"):
        response = client.request(method, "/api/v2/nothing")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_an_offset_past_sqlite_integers_is_a_400_not_a_500(client):
    response = client.get("/api/v1/documents", params={"offset": 2938768868077749141504})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert client.get("/api/v1/documents", params={"offset": 2**62}).json() == {
        "total": 0, "limit": 50, "offset": 2**62, "documents": []}


def test_an_unexpected_error_is_the_json_error_body_and_its_traceback_is_logged(
        tmp_path, caplog):
    """A fault no route expects (here the store's documents table is gone) answers the
    API's error body, internal_error, through a real server; the details only in the log."""
    settings = make_settings(tmp_path)
    appliance = Appliance(settings)
    try:
        with sqlite3.connect(settings.paths.database) as store:
            store.execute("DROP TABLE document")
        with serving(create_app(appliance), settings) as client:
            response = client.get("/api/v1/documents")
    finally:
        appliance.db.close()
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "internal_error"
    assert "Traceback" not in response.text and "no such table" not in response.text
    assert "Traceback" in caplog.text and "no such table: document" in caplog.text
    assert "method=GET path=/api/v1/documents" in caplog.text


def test_the_schema_declares_every_status_auth_and_links(client):
    schema = client.get("/openapi.json").json()
    upload = schema["paths"]["/api/v1/documents"]["post"]
    assert set(upload["responses"]) == {"200", "201", "400", "401", "403", "405", "409",
                                        "413", "429", "503", "507"}
    error = upload["responses"]["409"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorBody"}
    assert set(upload["responses"]["201"]["links"]) == {
        "GetDocument", "GetResult", "CancelDocument", "CorrectFields", "RetryDocument",
        "SendToReview"}
    assert schema["security"] == [{"ApiKey": []}, {"Bearer": []}]
    assert schema["paths"]["/healthz"]["get"]["security"] == []
    result = schema["paths"]["/api/v1/documents/{document_id}/result"]["get"]["responses"]
    assert set(result["200"]["content"]) == {"text/markdown; charset=utf-8", "application/json",
                                             "text/plain; charset=utf-8",
                                             "application/xhtml+xml; charset=utf-8",
                                             "application/xml; charset=utf-8",
                                             "application/pdf"}


def test_header_bytes_that_are_not_utf8_are_refused_not_a_crash(tmp_path):
    settings = make_settings(tmp_path, auth={"api_keys_file": str(tmp_path / "keys.toml")})
    ApiKeys(tmp_path / "keys.toml").add("scanner")
    appliance = Appliance(settings)
    try:
        client = TestClient(create_app(appliance))
        for header in ("Authorization", "X-API-Key"):
            response = client.get("/api/v1/documents",
                                  headers={header: "Bearer \xa1\xff".encode("latin-1")})
            assert response.status_code == 401, header
            assert response.json()["error"]["code"] == "unauthorized"
    finally:
        appliance.db.close()
