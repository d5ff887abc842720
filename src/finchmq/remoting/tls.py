"""TLS for the remoting protocol with Java 4.9.8's settings (``TlsSystemConfig``/``TlsHelper``).

Strategy:
    ``TlsConfig`` holds every ``tls.*`` setting under Java's name, read from properties
    (``broker.conf``, a name server's config, the command line) and then, as Java does, from the
    ``tls.config.file`` properties file, whose values win. A server's ``tls.server.mode``:
    ``disabled`` refuses TLS clients, ``permissive`` (Java's default) serves TLS and plain clients
    on one port, ``enforcing`` refuses plain clients. The server tells them apart by the first
    byte a client sends (``0x16``: a TLS handshake record; a remoting frame starts with its
    length, which can never be that large) and then starts TLS on the connection with the bytes
    already read (``start_server_tls``). ``tls.test.mode.enable`` (Java's default: true) makes
    the server use a self-signed certificate made on first use (with the ``openssl`` command)
    and the client trust any server, as Java's test mode does; turn it off to use
    ``tls.server.certPath``/``keyPath`` and verify peers.

    Java differences: Python's ``ssl`` cannot ask for a client certificate and then accept it
    unverified, so ``tls.server.need.client.auth`` ``optional``/``require`` always verifies the
    client's certificate against ``tls.server.trustCertPath`` (Java does so only with
    ``tls.server.authClient=true``); neither side checks host names (Java's Netty does not).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import dataclasses
import enum
import logging
import shutil
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from finchmq.common.properties import parse_properties

__all__ = [
    "TLS_CLIENT_KEYS",
    "TLS_CONFIG_FILE",
    "TLS_ENABLE",
    "TLS_HANDSHAKE_BYTE",
    "TLS_SERVER_MODE",
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "is_tls_key",
    "start_server_tls",
]

log = logging.getLogger(__name__)

TLS_HANDSHAKE_BYTE = 0x16  # the first byte of a TLS handshake record (Java HANDSHAKE_MAGIC_CODE)
TLS_SERVER_MODE = "tls.server.mode"
TLS_ENABLE = "tls.enable"
TLS_CONFIG_FILE = "tls.config.file"
DEFAULT_TLS_CONFIG_FILE = Path("/etc/rocketmq/tls.properties")  # Java's default


class TlsConfigError(ValueError):
    """A TLS setting that cannot work (a missing or unreadable file, a bad value); names it."""


class TlsMode(enum.Enum):
    """``tls.server.mode`` (Java ``TlsMode``)."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}

# field name -> Java's property name (TlsSystemConfig)
_KEYS: dict[str, str] = {
    "server_mode": TLS_SERVER_MODE,
    "enable": TLS_ENABLE,
    "config_file": TLS_CONFIG_FILE,
    "test_mode_enable": "tls.test.mode.enable",
    "server_need_client_auth": "tls.server.need.client.auth",
    "server_key_path": "tls.server.keyPath",
    "server_key_password": "tls.server.keyPassword",
    "server_cert_path": "tls.server.certPath",
    "server_auth_client": "tls.server.authClient",
    "server_trust_cert_path": "tls.server.trustCertPath",
    "client_key_path": "tls.client.keyPath",
    "client_key_password": "tls.client.keyPassword",
    "client_cert_path": "tls.client.certPath",
    "client_auth_server": "tls.client.authServer",
    "client_trust_cert_path": "tls.client.trustCertPath",
}
_BY_KEY = {key: name for name, key in _KEYS.items()}
_FILE_KEYS = frozenset(_KEYS) - {"server_mode", "enable", "config_file"}  # what Java reads from the file
TLS_CLIENT_KEYS: frozenset[str] = frozenset(
    key for name, key in _KEYS.items() if not name.startswith("server_")
)
"""The keys a client reads: ``tls.enable``, ``tls.config.file``, ``tls.test.mode.enable`` and
``tls.client.*`` (the rest are a server's)."""


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"  # Java Boolean.parseBoolean: anything else is false


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """Every ``tls.*`` setting (Java ``TlsSystemConfig``), Java's defaults."""

    server_mode: TlsMode = TlsMode.PERMISSIVE
    # tls.enable: clients connect with TLS (Java ClientConfig.useTLS); None = not given, which a
    # broker takes as "when tls.server.mode is enforcing" for its name-server client (BrokerStartup)
    enable: bool | None = None
    config_file: Path = DEFAULT_TLS_CONFIG_FILE
    test_mode_enable: bool = True
    server_need_client_auth: str = "none"  # none | optional | require
    server_key_path: str | None = None
    server_key_password: str | None = None
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None
    client_key_path: str | None = None
    client_key_password: str | None = None
    client_cert_path: str | None = None
    client_auth_server: bool = False
    client_trust_cert_path: str | None = None

    def __post_init__(self) -> None:
        if self.server_need_client_auth.strip().lower() not in _CLIENT_AUTH:
            raise TlsConfigError(
                f"bad tls.server.need.client.auth {self.server_need_client_auth!r}: "
                "expected none, optional or require"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], base: TlsConfig | None = None) -> TlsConfig:
        """``base`` with the ``tls.*`` keys of ``properties``, then ``tls.config.file``'s (which win,
        as in Java) if that file exists. Other keys are ignored.

        Raises:
            TlsConfigError: a bad mode or client-auth value, or an unreadable config file.
        """
        config = base or cls()
        changes: dict[str, object] = {}
        for key, raw in properties.items():
            name = _BY_KEY.get(key)
            if name is not None:
                changes[name] = _value(name, key, raw)
        config = _replace(config, changes)
        return config._with_file()

    def _with_file(self) -> TlsConfig:
        path = self.config_file
        if not path.is_file():
            if path != DEFAULT_TLS_CONFIG_FILE:
                raise TlsConfigError(f"tls.config.file {path} does not exist")
            return self
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TlsConfigError(f"cannot read tls.config.file {path}: {exc.strerror}") from None
        values = parse_properties(text)
        changes = {
            name: _value(name, _KEYS[name], values[_KEYS[name]])
            for name in _FILE_KEYS
            if _KEYS[name] in values
        }
        return _replace(self, changes)

    def to_properties(self) -> dict[str, str]:
        """The settings under Java's names (passwords left out)."""
        out: dict[str, str] = {}
        for name, key in _KEYS.items():
            if name.endswith("password"):
                continue
            value = getattr(self, name)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, TlsMode):
                out[key] = value.value
            elif value is not None:
                out[key] = str(value)
        return out

    # -- contexts ---------------------------------------------------------------------------

    @property
    def broker_client_uses_tls(self) -> bool:
        """Whether a server's own client (a broker's to its name servers) uses TLS: ``tls.enable``
        if given, else whether ``tls.server.mode`` is enforcing (Java ``BrokerStartup``)."""
        return self.enable if self.enable is not None else self.server_mode is TlsMode.ENFORCING

    def client_context(self) -> ssl.SSLContext:
        """The client side (Java ``TlsHelper.buildSslContext(true)``).

        Raises:
            TlsConfigError: a certificate, key or trust file cannot be loaded.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        if self.test_mode_enable or not self.client_auth_server:
            ctx.verify_mode = ssl.CERT_NONE  # Java's InsecureTrustManagerFactory
        else:
            ctx.verify_mode = ssl.CERT_REQUIRED
            if self.client_trust_cert_path:
                _load_verify(ctx, "tls.client.trustCertPath", self.client_trust_cert_path)
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if not self.test_mode_enable and self.client_cert_path:
            _load_chain(
                ctx,
                "tls.client",
                self.client_cert_path,
                self.client_key_path,
                self.client_key_password,
            )
        return ctx

    def server_context(self) -> ssl.SSLContext:
        """The server side with the configured certificate (test mode off).

        Raises:
            TlsConfigError: no certificate/key configured, or a file that cannot be loaded.
        """
        if not self.server_cert_path or not self.server_key_path:
            raise TlsConfigError(
                "TLS needs tls.server.certPath and tls.server.keyPath when tls.test.mode.enable=false "
                "(or set tls.server.mode=disabled)"
            )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _load_chain(ctx, "tls.server", self.server_cert_path, self.server_key_path, self.server_key_password)
        ctx.verify_mode = _CLIENT_AUTH[self.server_need_client_auth.strip().lower()]
        if ctx.verify_mode != ssl.CERT_NONE:
            if not self.server_trust_cert_path:
                raise TlsConfigError(
                    f"tls.server.need.client.auth={self.server_need_client_auth} needs "
                    "tls.server.trustCertPath: the CA certificate(s) that sign client certificates"
                )
            _load_verify(ctx, "tls.server.trustCertPath", self.server_trust_cert_path)
        return ctx


def is_tls_key(key: str) -> bool:
    """Whether ``key`` is one of Java's ``tls.*`` settings (kept out of the broker's own config)."""
    return key in _BY_KEY


def _value(name: str, key: str, raw: str) -> object:
    field_type = {f.name: f.type for f in dataclasses.fields(TlsConfig)}[name]
    text = raw.strip()
    if name == "server_mode":
        try:
            return TlsMode(text.lower())
        except ValueError:
            raise TlsConfigError(f"bad {key} {raw!r}: expected disabled, permissive or enforcing") from None
    if field_type in ("bool", "bool | None"):
        return _bool(text)
    if name == "config_file":
        return Path(text).expanduser()
    if name == "server_need_client_auth":
        return text or "none"
    return text or None


def _replace(config: TlsConfig, changes: Mapping[str, object]) -> TlsConfig:
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]


def _load_chain(ctx: ssl.SSLContext, prefix: str, cert: str, key: str | None, password: str | None) -> None:
    try:
        ctx.load_cert_chain(cert, key or None, password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load {prefix}.certPath {cert} / {prefix}.keyPath {key}: {exc}"
        ) from None


def _load_verify(ctx: ssl.SSLContext, key: str, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load {key} {path}: {exc}") from None


# -- test mode: a self-signed certificate, made once per process ---------------------------------

_test_context: list[ssl.SSLContext] = []  # made at most once
_test_lock = threading.Lock()


def self_signed_server_context() -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate (Java test mode's
    ``SelfSignedCertificate``); made with the ``openssl`` command on first use, then shared.

    Raises:
        TlsConfigError: no ``openssl`` command, or it failed.
    """
    with _test_lock:
        if _test_context:
            return _test_context[0]
        openssl = shutil.which("openssl")
        if openssl is None:
            raise TlsConfigError(
                "tls.test.mode.enable=true needs the openssl command to make a self-signed certificate; "
                "install it, or set tls.test.mode.enable=false with tls.server.certPath/keyPath"
            )
        with tempfile.TemporaryDirectory(prefix="finchmq-tls-") as tmp:
            cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            result = subprocess.run(
                [
                    openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "365", "-subj", "/CN=localhost",
                    "-keyout", str(key), "-out", str(cert),
                ],
                capture_output=True,
                text=True,
                check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise TlsConfigError(
                    f"openssl could not make a self-signed certificate: {result.stderr.strip()}"
                )
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert), str(key))
        _test_context.append(ctx)
        return ctx


# -- the server side of an upgrade: TLS on a connection whose first bytes were already read ------


def start_server_tls(
    transport: asyncio.Transport,
    app_protocol: asyncio.BaseProtocol,
    context: ssl.SSLContext,
    first_data: bytes,
    *,
    handshake_timeout: float,
    on_done: Callable[[BaseException | None], None],
) -> None:
    """Run TLS on ``transport`` for ``app_protocol``, feeding it ``first_data`` (the client's
    first bytes, read while sniffing). ``app_protocol.connection_made`` is called with the TLS
    transport once the handshake succeeds; then ``on_done(None)``, or ``on_done(error)`` if it
    fails (the connection is then closed)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    tls = asyncio.sslproto.SSLProtocol(
        loop,
        app_protocol,
        context,
        waiter,
        server_side=True,
        ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type]  # typeshed says int; seconds
    )

    def done(fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            on_done(ConnectionAbortedError("TLS handshake cancelled"))
        else:
            on_done(fut.exception())

    waiter.add_done_callback(done)
    transport.set_protocol(tls)
    tls.connection_made(transport)
    view = memoryview(first_data)
    while view:
        buf = tls.get_buffer(len(view))
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        tls.buffer_updated(n)
        view = view[n:]
