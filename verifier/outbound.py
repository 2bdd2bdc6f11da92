"""Requests KGV sends to a URL a user set (webhooks, and any such URL to come): never to the machine itself or the
networks behind it.

A URL is refused when it is not http(s), names no host, carries credentials (``user:pass@``) or an invalid port, or
when its host resolves to an address that is loopback, private, link-local (169.254.169.254, the cloud metadata
service), multicast, reserved, unspecified (0.0.0.0) or otherwise not global — unless the operator allowed that
address's network (``KGV_WEBHOOK_ALLOWED_NETWORKS``). ``validate_url`` checks a URL where it is registered (the
webhooks form and API); ``session()`` is the HTTP client that sends to one, which checks the addresses again on every
connection and connects to the address it checked, so a name whose DNS answer changed since (or changes between
the check and the connection) reaches nothing internal; check_form is the rest of the URL's rules, for the sender to
apply before it sends. The client follows no proxy settings (and its callers no redirects).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from verifier.errors import ApplicationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(ApplicationError):
    """A URL or an address KGV will not send a request to (the message says why)."""


def _kind(address: IPAddress) -> str | None:
    """Why an address is internal ("loopback", …), or None for a global one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:  # ::ffff:127.0.0.1
        address = address.ipv4_mapped
    for kind in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if address.is_global else "non-global"


def _allowed(address: IPAddress) -> bool:
    return any(address in network for network in settings.KGV_WEBHOOK_ALLOWED_NETWORKS if address.version == network.version)


def check_address(host: str, address: str) -> IPAddress:
    """The address ``host`` resolved to, if KGV may connect to it; OutboundRefused otherwise."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone ("fe80::1%eth0") is not part of the address
    kind = _kind(ip)
    if kind is not None and not _allowed(ip):
        named = host if host == str(ip) else f"{host} resolves to {ip}, which"
        raise OutboundRefused(f"{named} is a {kind} address: KGV sends nothing to internal addresses (an operator "
                              "can allow a network with KGV_WEBHOOK_ALLOWED_NETWORKS)")
    return ip


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to, each checked: one internal address refuses the host. A name that does not
    resolve raises socket.gaierror (a connection error: DNS may answer on the next attempt)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError:  # a name IDNA cannot encode (a label over 63 characters, …)
        raise OutboundRefused(f"{host!r} is not a valid host name") from None
    addresses = []
    for *_, sockaddr in found:
        address = check_address(host, sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OutboundRefused(f"the host {host} resolves to no address")
    return addresses


def check_form(url: str) -> tuple[str, int]:
    """The host and port of an http(s) URL without credentials and with a valid port; OutboundRefused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise OutboundRefused("only http:// and https:// URLs can be sent to")
    if parts.username is not None or parts.password is not None:
        raise OutboundRefused("the URL carries credentials (user:password@): put a secret in the path or rely on the "
                              "signature instead")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # not a number, or over 65535
        raise OutboundRefused("the URL's port is not a port number (1-65535)") from None
    if port == 0:
        raise OutboundRefused("the URL's port is not a port number (1-65535)")
    if not parts.hostname:
        raise OutboundRefused("the URL names no host")
    return parts.hostname, port


def check_url(url: str) -> str:
    """The URL if KGV may send requests to it: check_form, and the addresses its host resolves to now. A name that
    does not resolve (yet) passes: every connection checks it again (session)."""
    host, port = check_form(url)
    try:
        resolve(host, port)
    except socket.gaierror:
        pass
    return url


def validate_url(url: str) -> None:
    """Field validator (the webhooks form and API serializer): a ValidationError saying why a URL is refused — not a
    well-formed http(s) URL (Django's URLValidator), or refused by check_url."""
    URLValidator(schemes=["http", "https"])(url)
    try:
        check_url(url)
    except OutboundRefused as refused:
        raise ValidationError(str(refused), code="outbound_refused") from None


class _CheckedConnectionMixin:
    """A connection that resolves and checks its host itself and connects to the address it checked; the Host
    header and the TLS server name stay the host's name."""

    def _new_conn(self):
        name = self._dns_host
        self._dns_host = str(resolve(name, self.port)[0])
        try:
            return super()._new_conn()
        finally:
            self._dns_host = name


class _CheckedHTTPConnection(_CheckedConnectionMixin, HTTPConnection):
    pass


class _CheckedHTTPSConnection(_CheckedConnectionMixin, HTTPSConnection):
    pass


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class _CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}


def session() -> requests.Session:
    """An HTTP client for URLs users set: every connection checked as above, no proxy from the environment."""
    client = requests.Session()
    client.trust_env = False
    client.mount("http://", _CheckedAdapter())
    client.mount("https://", _CheckedAdapter())
    return client
