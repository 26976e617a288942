"""Measuring the appliance: `appliance eval` (accuracy on datasets with ground truth) and
`appliance bench` (throughput and latency), both through the daemon's own pipeline."""

from __future__ import annotations
