"""`appliance install-service`: lay out the systemd service for this installation.

What goes where (under ``--root``, "/" by default):

    /etc/systemd/system/ocr-appliance.service  systemd/ocr-appliance.service, with
                                               ExecStart at this installation's
                                               `appliance`; rewritten every time
    /usr/lib/sysusers.d/ocr-appliance.conf     the service user and group
    /usr/lib/tmpfiles.d/ocr-appliance.conf     its directories and their owners
    /etc/ocr-appliance/config.toml             the shipped config.toml, its paths
                                               under /var/lib/ocr-appliance; never
                                               overwritten once it exists
    /var/lib/ocr-appliance/{data,output}

The unit is fitted to the config in effect (the existing one, else the new copy):
TimeoutStopSec outlasts ``server.drain_timeout_s``, ReadWritePaths names its data,
output and watched directories, and ProtectHome turns read-only when any of them or
the installation lies under /home. On the real root, run as root, the user and the
directories are created at once (systemd-sysusers, systemd-tmpfiles); what is left
to do is printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from appliance.config import DEFAULT_CONFIG, Settings, settings_from_dict
from appliance.errors import ConfigError

INSTALL_DIR = DEFAULT_CONFIG.parent
SHIPPED = INSTALL_DIR / "systemd"
SERVICE = "ocr-appliance"
ETC_DIR = Path("/etc/ocr-appliance")
STATE_DIR = Path("/var/lib/ocr-appliance")
CONFIG = ETC_DIR / "config.toml"
UNIT = Path("/etc/systemd/system") / f"{SERVICE}.service"
SYSUSERS = Path("/usr/lib/sysusers.d") / f"{SERVICE}.conf"
TMPFILES = Path("/usr/lib/tmpfiles.d") / f"{SERVICE}.conf"
# How much longer than the drain a stop may take: uvicorn's last connections, the
# workers' exit, the watchers' threads.
STOP_MARGIN_S = 60
HOMES = (Path("/home"), Path("/root"), Path("/run/user"))
# config.toml keys the installed copy changes, each with its new value
CONFIG_VALUES = {"host": "127.0.0.1", "data_dir": str(STATE_DIR / "data"),
                 "output_dir": str(STATE_DIR / "output"), "users_file": str(ETC_DIR / "users.toml")}


@dataclass
class Step:
    path: Path  # as on the installed system; written under the root
    content: str | None  # None: a directory
    mode: int
    keep: bool = False  # it exists and must not be overwritten


def executable() -> str:
    """How systemd should start this installation's `appliance` command."""
    script = Path(sys.executable).parent / "appliance"  # the venv's, symlinks kept
    if script.is_file():
        return str(script)
    found = shutil.which("appliance")
    return found or f"{sys.executable} -m appliance.cli"


def render_config(shipped: str, install_dir: Path = INSTALL_DIR) -> str:
    """The shipped config.toml, comments kept, with the service's paths; a relative
    model path is made absolute (it was relative to the installation)."""
    text = shipped
    for key, value in CONFIG_VALUES.items():
        text, count = re.subn(rf'^{key}\s*=.*$', f'{key} = "{value}"', text, flags=re.M)
        if count != 1:
            raise ConfigError(f"{DEFAULT_CONFIG}: expected one '{key} =' line to rewrite, found "
                              f"{count}; restore the shipped config.toml")
    for key in ("model", "mmproj"):
        match = re.search(rf'^{key}\s*=\s*"([^"]+)"', text, flags=re.M)
        if match and not Path(match.group(1)).is_absolute():
            absolute = (install_dir / match.group(1)).resolve()
            text = text[:match.start()] + f'{key} = "{absolute}"' + text[match.end():]
    header = (f"# Installed by `appliance install-service` from {install_dir / 'config.toml'}:\n"
              f"# data and results under {STATE_DIR}, reviewer accounts in {ETC_DIR}.\n"
              f"# After a change: `systemctl reload {SERVICE}` for [[watch]] and [review],\n"
              f"# `systemctl restart {SERVICE}` for the rest.\n#\n")
    return header + text


def load_installed(text: str, where: Path) -> Settings:
    """Settings as the service will read them (relative paths against /etc/...)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc}); fix it and run again") from None
    return settings_from_dict(raw, base_dir=ETC_DIR, source=where)


def _under_home(path: Path) -> bool:
    return any(path == home or home in path.parents for home in HOMES)


def _set(unit: str, key: str, lines: list[str]) -> str:
    """Replace the one ``key=`` line of the unit by ``lines``."""
    pattern = re.compile(rf"^{key}=.*$", re.M)
    if len(pattern.findall(unit)) != 1:
        raise ConfigError(f"{SHIPPED / 'ocr-appliance.service'}: expected one {key}= line")
    return pattern.sub(lambda _m: "\n".join(f"{key}={line}" for line in lines), unit)


def render_unit(template: str, command: str, settings: Settings,
                install_dir: Path = INSTALL_DIR) -> tuple[str, list[str]]:
    """The unit for this installation and config, and notes for the operator."""
    notes = []
    unit = _set(template, "ExecStart", [f"{command} serve --config {CONFIG}"])
    unit = _set(unit, "Documentation", [f"file://{install_dir / 'systemd' / 'README.md'}"])
    unit = _set(unit, "TimeoutStopSec",
                [f"{int(settings.server.drain_timeout_s + STOP_MARGIN_S)}s"])
    writable = [str(STATE_DIR)]
    for path in (settings.paths.data_dir, settings.paths.output_dir):
        if STATE_DIR not in path.parents and path != STATE_DIR:
            writable.append(str(path))
    for folder in settings.watch:  # "-": a share that is not mounted does not stop the start
        writable += [f"-{p}" for p in (folder.path, folder.processed_dir, folder.failed_dir)
                     if p is not None]
    unit = _set(unit, "ReadWritePaths", list(dict.fromkeys(writable)))
    homes = [p for p in [install_dir, *(Path(w.lstrip("-")) for w in writable)]
             if _under_home(p)]
    if homes:
        unit = _set(unit, "ProtectHome", ["read-only"])
        notes.append(f"ProtectHome=read-only, not yes: {homes[0]} lies under a home "
                     f"directory; an installation under /opt is better isolated")
    return unit, notes


def plan(root: Path, command: str | None = None) -> tuple[list[Step], list[str]]:
    """What to write, and notes; writes nothing."""
    command = command or executable()
    existing = root / CONFIG.relative_to("/")
    notes = []
    if existing.exists():
        config_text = existing.read_text(encoding="utf-8")
        config_step = Step(CONFIG, config_text, 0o640, keep=True)
    else:
        config_text = render_config(DEFAULT_CONFIG.read_text(encoding="utf-8"))
        config_step = Step(CONFIG, config_text, 0o640)
    settings = load_installed(config_text, CONFIG)
    unit, unit_notes = render_unit((SHIPPED / f"{SERVICE}.service").read_text(), command,
                                   settings)
    notes += unit_notes
    steps = [Step(UNIT, unit, 0o644),
             Step(SYSUSERS, (SHIPPED / f"{SERVICE}.sysusers.conf").read_text(), 0o644),
             Step(TMPFILES, (SHIPPED / f"{SERVICE}.tmpfiles.conf").read_text(), 0o644),
             Step(ETC_DIR, None, 0o770), config_step,
             Step(STATE_DIR, None, 0o750), Step(STATE_DIR / "data", None, 0o750),
             Step(STATE_DIR / "output", None, 0o750)]
    return steps, notes


def _target(root: Path, path: Path) -> Path:
    return root / path.relative_to("/")


def install_service(root: Path = Path("/"), dry_run: bool = False,
                    command: str | None = None) -> list[str]:
    """Lay out the service under ``root``; the report, one line each."""
    root = root.resolve()
    steps, notes = plan(root, command)
    where = "" if root == Path("/") else f" (under {root})"
    report = [f"{'would install' if dry_run else 'installing'} the {SERVICE} service{where}"]
    for step in steps:
        target = _target(root, step.path)
        if step.keep:
            report.append(f"kept     {step.path}: it exists and is not overwritten; compare it "
                          f"with {DEFAULT_CONFIG} for new keys")
            continue
        if step.content is None:
            if target.is_dir():
                continue
            report.append(f"mkdir    {step.path}")
            if not dry_run:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(step.mode)
            continue
        changed = not target.exists() or target.read_text(encoding="utf-8") != step.content
        report.append(f"{'write' if changed else 'same':8} {step.path}")
        if not dry_run and changed:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(step.content, encoding="utf-8")
            tmp.chmod(step.mode)
            os.replace(tmp, target)
    report += [f"note     {note}" for note in notes]
    report += _system_steps(root, dry_run)
    return report


def _system_steps(root: Path, dry_run: bool) -> list[str]:
    """Create the user and the directories' owners now when we can, else say how."""
    option = "" if root == Path("/") else f" --root={root}"
    commands = [["systemd-sysusers", *option.split(), str(_target(root, SYSUSERS))],
                ["systemd-tmpfiles", *option.split(), "--create", str(_target(root, TMPFILES))]]
    lines, todo = [], []
    for cmd in commands:
        if dry_run or root != Path("/") or os.geteuid() != 0:
            todo.append(" ".join(cmd))
            continue
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"failed   {' '.join(cmd)}: {exc}")
            todo.append(" ".join(cmd))
            continue
        lines.append(f"ran      {' '.join(cmd)}" + (f": {run.stderr.strip()}" if run.stderr.strip()
                                                     else ""))
        if run.returncode:
            todo.append(" ".join(cmd))
    todo.append(f"systemctl daemon-reload && systemctl enable --now {SERVICE}")
    return [*lines, "next steps (as root):", *(f"  {cmd}" for cmd in todo),
            f"then: journalctl -u {SERVICE} -f; reviewer accounts: sudo -u {SERVICE} "
            f"{executable()} users add NAME --config {CONFIG}"]
