"""Which hosts a completion webhook may go to (webhooks.allow_hosts): the pure policy,
and a delivery to a host taken off the list after the document was submitted."""

from __future__ import annotations

import pytest

from appliance.errors import ConfigError, WebhookNotAllowed
from appliance.webhooks import WebhookPolicy


def test_names_wildcards_addresses_and_cidrs():
    policy = WebhookPolicy(["hooks.example.com", "*.corp.example", "10.1.2.0/24", "::1"])
    for url in ("https://hooks.example.com/x", "http://HOOKS.example.com.:8080/x",
                "https://erp.corp.example/h", "https://a.b.corp.example/h",
                "http://10.1.2.77/h", "http://[::1]:9000/h"):
        policy.check(url)
    for url in ("https://evil.example.com/x", "https://corp.example.evil/x",
                "http://10.1.3.1/h", "http://127.0.0.1/h", "http://169.254.169.254/",
                "ftp://hooks.example.com/x", "file:///etc/passwd", "http:///nohost",
                "https://[::1/x", "https://༄]ëý/x", "not a url"):
        with pytest.raises(WebhookNotAllowed):
            policy.check(url)


def test_an_empty_list_means_no_webhooks():
    with pytest.raises(WebhookNotAllowed, match="none: webhooks are off"):
        WebhookPolicy([]).check("https://hooks.example.com/x")


def test_a_bad_pattern_stops_start_up():
    with pytest.raises(ConfigError, match="allow_hosts"):
        WebhookPolicy(["hooks.example.com:8080"])
