"""Typed readers for environment variables that fail loudly at start-up.

Every setting of KGV comes from the environment (docs/reference/configuration.md lists them). A value that
cannot be parsed raises ``ImproperlyConfigured`` naming the variable, the value and what was expected,
so a typo stops the process at start-up instead of surfacing as a strange error hours later.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name}={value} must be between {minimum} and {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Comma-separated networks in CIDR notation (``10.1.0.0/16,::1/128``; a bare address is its own network)."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network such as 10.1.0.0/16 or an address") from None
    return networks


def env_url(name: str, default: str = "", *, schemes: tuple[str, ...]) -> str:
    raw = os.environ.get(name, default)
    if not raw:
        return raw
    parts = urlsplit(raw)
    if parts.scheme not in schemes:
        allowed = ", ".join(f"{s}://" for s in schemes)
        raise ImproperlyConfigured(f"{name}={raw!r} must start with one of {allowed}")
    if not parts.netloc and not parts.path and not parts.query:
        raise ImproperlyConfigured(f"{name}={raw!r} names no host")
    return raw


def database_from_url(url: str) -> dict:
    """Django DATABASES entry from ``postgresql://user:password@host:port/name?options``.

    A Unix-socket directory may be given as ``?host=/path`` (as the embedded server does).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} must be a postgresql:// URL (KGV needs PostgreSQL + pgvector)")
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no database (…/dbname)")
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = options.pop("host", None) or (unquote(parts.hostname) if parts.hostname else "")
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} has an invalid port") from None
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": options,
        # Under ASGI each request may run on another thread; persistent connections would pile up.
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": f"test_{name}"},
    }
