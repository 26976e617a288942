"""Reason codes: one class each, a stable unique code, and a remedy said once."""

from __future__ import annotations

from appliance import errors
from appliance.errors import (
    ApplianceError, Cancelled, CrashesWorker, EndpointUnavailable, MemoryCritical,
    StoppedAtShutdown, error_class_for,
)


def every_class() -> list[type[ApplianceError]]:
    return [value for value in vars(errors).values()
            if isinstance(value, type) and issubclass(value, ApplianceError)]


def test_every_reason_code_belongs_to_one_class():
    codes = [cls.code for cls in every_class()]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)
    for cls in every_class():  # what a worker sends back is rebuilt as its own class
        assert error_class_for(cls.code) is cls


def test_a_class_says_its_remedy_once_and_the_raise_site_only_the_specifics():
    poison = CrashesWorker("the page crashed the engine 3 times in a row")
    assert poison.message == ("the page crashed the engine 3 times in a row; it was set "
                              "aside; check the file, or try the other engine")
    assert poison.to_dict() == {"code": "crashes_worker", "message": poison.message}
    assert MemoryCritical().message.startswith("stopped to free memory")
    assert "after the restart" in StoppedAtShutdown().message
    assert "retry the document" in Cancelled().message
    # a class whose remedy depends on the case keeps the message it is given
    assert EndpointUnavailable("HTTP 502 from gpu-2").message == "HTTP 502 from gpu-2"
    assert ApplianceError().message == "internal_error"
