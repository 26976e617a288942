"""`appliance doctor` asks each [[engine.remote]] endpoint what the remote engine will
ask it, against real servers on loopback: llama-cpp-python's own server with the tiny
model (plain, and with TLS and an API key as a GPU host would run it), a scripted
server that answers 500, and a port nobody listens on."""

from __future__ import annotations

from dataclasses import asdict

from appliance.config import RemoteEndpoint, load_settings
from appliance.doctor import doctor, exit_code
from appliance.engines.remote.checks import endpoint_checks
from tests.daemon import free_port
from tests.openai_servers import ScriptedServer, endpoint, self_signed_certificate, tiny_server
from tests.service.test_doctor import run_doctor, write_config

SECRET = "sk-doctor-never-shows-this"
REMOTE = ("remote.reachable", "remote.model", "remote.image", "remote.logprobs",
          "remote.latency")


def of(checks, name: str) -> dict[str, tuple[str, str]]:
    """One endpoint's checks: {check name: (status, detail)}."""
    return {c.name: (c.status, c.detail) for c in checks if c.detail.startswith(name)}


def test_a_served_endpoint_passes_every_check(tmp_path, llama_cpp_server):
    # engine.name = auto with no local model: the endpoint reads every page
    config = write_config(tmp_path, remote=[endpoint(llama_cpp_server.url, "tiny", "gpu2",
                                                     api_key=SECRET)])
    code, checks, lines = run_doctor(config)
    assert code == 0, lines
    assert SECRET not in "\n".join(lines)
    assert checks["model"].startswith("ok   model: no local vision model (engine.model): the "
                                      "[[engine.remote]] endpoints read every page")
    assert [line[:4] for line in lines if line[5:].startswith("remote.")] == ["ok  "] * 5
    assert checks["remote.reachable"].startswith(
        f"ok   remote.reachable: gpu2 ({llama_cpp_server.url}) answers GET /models in ")
    assert checks["remote.model"] == "ok   remote.model: gpu2 lists 'tiny'"
    assert checks["remote.image"].startswith("ok   remote.image: gpu2 read a 320x320 test "
                                             "page: ")
    assert checks["remote.image"].endswith("in at most 16 tokens, served by 'tiny'")
    assert "gpu2 sends token log-probabilities" in checks["remote.logprobs"]
    assert " ms for the test page" in checks["remote.latency"]


def test_a_wrong_model_names_the_listed_ones_and_missing_logprobs_warn(tmp_path,
                                                                       llama_cpp_server):
    settings = load_settings(write_config(tmp_path, name="openai", remote=[
        endpoint(llama_cpp_server.url, "gemma3", "wrong"),
        # a server that sends no logprobs, as `extra` can make any server do
        endpoint(llama_cpp_server.url, "tiny", "quiet", extra={"logprobs": False})]))
    checks = doctor(settings)
    assert exit_code(checks) == 1
    wrong = of(checks, "wrong")
    assert list(wrong) == ["remote.reachable", "remote.model"]  # no page sent to a wrong model
    assert wrong["remote.model"] == ("FAIL", "wrong does not serve model 'gemma3'; it lists "
                                             "'tiny': set model in its [[engine.remote]] table "
                                             "to the one to read pages with")
    quiet = of(checks, "quiet")
    assert list(quiet) == list(REMOTE)
    assert quiet["remote.image"][0] == "ok"
    status, detail = quiet["remote.logprobs"]
    assert status == "warn" and "sent no token log-probabilities" in detail
    assert "confidence then rests on the other signals" in detail


def test_a_down_endpoint_is_a_failed_check_with_what_to_do(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with ScriptedServer("error500") as failing:
        config = write_config(tmp_path, name="openai", remote=[
            endpoint(failing.url, "scripted", "failing", api_key=SECRET),
            endpoint(closed, "tiny", "gone", api_key=SECRET, timeout_s=2),
            endpoint(closed, "tiny", "keyless", api_key_file=str(tmp_path / "no-such-key"))])
        code, _, lines = run_doctor(config)  # every line well-formed: no traceback
    assert code == 1
    assert SECRET not in "\n".join(lines)
    remote = [line for line in lines if line[5:].startswith("remote")]
    assert remote == [line for line in remote if line.startswith("FAIL remote.reachable: ")]
    failing_line, gone, keyless = remote
    assert "endpoint failing answered HTTP 500 (see its log)" in failing_line
    assert "probe it until it answers" in failing_line
    assert "endpoint gone could not be reached (ConnectError" in gone
    assert "is the server running, and is its host:port reachable from this host" in gone
    assert keyless.startswith("FAIL remote.reachable: endpoint keyless: cannot read its "
                              "api_key_file (No such file or directory): fix it")


def test_endpoints_not_read_from_are_not_asked(tmp_path):
    settings = load_settings(write_config(tmp_path, name="classic", remote=[
        endpoint(f"http://127.0.0.1:{free_port()}/v1", "tiny", "idle")]))
    remote = [c for c in doctor(settings) if c.name.startswith("remote")]
    assert [(c.status, c.name, c.detail) for c in remote] == [
        ("ok", "remote", "engine.name = classic: the 1 [[engine.remote]] endpoint(s) are "
                         "not used")]


def test_tls_and_the_api_key_are_checked_as_a_gpu_host_serves_them(tmp_path, tiny_model):
    cert, key = self_signed_certificate(tmp_path)
    with tiny_server(*tiny_model, tmp_path, api_key=SECRET, tls=(cert, key)) as server:
        def checks(**options):
            table = RemoteEndpoint(url=server.url, model="tiny", name="gpu2", image_side=224,
                                   **options)
            return {c.name: (c.status, c.detail) for c in endpoint_checks(asdict(table))}

        untrusted = checks(api_key=SECRET)
        key_file = tmp_path / "gpu2.key"
        key_file.write_text(SECRET + "\n")
        trusted = checks(api_key_file=key_file, ca_file=cert)
        wrong_key = checks(api_key="sk-wrong", ca_file=cert)
    status, detail = untrusted["remote.reachable"]
    assert status == "FAIL" and "CERTIFICATE_VERIFY_FAILED" in detail
    assert "set ca_file to the CA that signed it" in detail
    assert [status for status, _ in trusted.values()] == ["ok"] * 5
    status, detail = wrong_key["remote.reachable"]
    assert status == "FAIL" and "HTTP 401 (check its api_key)" in detail
    assert SECRET not in repr([untrusted, trusted, wrong_key])


def test_a_server_that_answers_no_reading_fails_the_image_check():
    with ScriptedServer("no_choice") as empty, ScriptedServer("hang") as silent:
        checks = {name: {c.name: (c.status, c.detail) for c in endpoint_checks(
                      asdict(RemoteEndpoint(url=server.url, model="scripted", name=name,
                                            image_side=224, timeout_s=1)))}
                  for name, server in (("empty", empty), ("silent", silent))}
    for name in ("empty", "silent"):  # it lists its model, then reads no page
        assert list(checks[name]) == ["remote.reachable", "remote.model", "remote.image"]
        assert checks[name]["remote.model"][0] == "ok"
    status, detail = checks["empty"]["remote.image"]
    assert status == "FAIL" and "a chat completion with no choice in it" in detail
    assert "the model must read images (llama-server: --mmproj" in detail
    status, detail = checks["silent"]["remote.image"]
    assert status == "FAIL" and detail.startswith("endpoint silent did not answer within its "
                                                  "timeout_s")
    assert "must read images" not in detail  # silence is not a missing projector
