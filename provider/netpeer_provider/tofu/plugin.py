"""Running as an OpenTofu provider plugin: the go-plugin handshake, AutoMTLS, serving, exiting.

OpenTofu starts the plugin with ``TF_PLUGIN_MAGIC_COOKIE`` set (anything else is a person running it
by hand: refuse), ``PLUGIN_PROTOCOL_VERSIONS`` (we speak 6) and, for mutual TLS, ``PLUGIN_CLIENT_CERT``
(its client certificate, PEM). We then

1. listen on a unix socket in a private directory (0700; removed on exit),
2. when a client certificate was given: make an ephemeral self-signed server certificate and key
   (ECDSA P-256, by the ``openssl`` command, kept in memory: the key never touches the disk where the
   system has anonymous memory files), and accept only clients presenting exactly that certificate
   (see :class:`TlsFront` for why TLS is not gRPC's own),
3. print ``1|6|unix|<socket>|grpc|<server cert, base64 DER, unpadded>`` on stdout, and
4. serve until OpenTofu calls ``GRPCController.Shutdown``, sends SIGTERM, or goes away.

Start-up time matters (OpenTofu starts the plugin several times per command): nothing heavy is
imported before the cookie check, and gRPC only once we know we will serve.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Callable

MAGIC_COOKIE_KEY = "TF_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
CORE_PROTOCOL_VERSION = 1
APP_PROTOCOL_VERSION = 6

NOT_A_COMMAND = ("This binary is a plugin: it is not meant to be run directly, but started by "
                 "OpenTofu (tofu) or Terraform, which load it automatically.")


class PluginError(Exception):
    """A reason not to start; the message is printed on one line."""


def check_environment(environ: dict[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    if env.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        raise PluginError(NOT_A_COMMAND)
    versions = env.get("PLUGIN_PROTOCOL_VERSIONS")
    if versions and str(APP_PROTOCOL_VERSION) not in [v.strip() for v in versions.split(",")]:
        raise PluginError(f"this provider speaks plugin protocol {APP_PROTOCOL_VERSION}; "
                          f"the client accepts only {versions}")


def pem_to_der(pem: str | bytes) -> bytes:
    """The DER bytes of the first certificate of a PEM text."""
    text = pem.decode() if isinstance(pem, bytes) else pem
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise ValueError("no PEM certificate")
    return base64.b64decode("".join(text[start + len(begin):stop].split()))


def start_server_cert() -> subprocess.Popen:
    """Begin making a fresh self-signed ECDSA certificate for "localhost" (``finish_server_cert``
    collects it): the openssl command runs while we import gRPC."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PluginError("the openssl command is needed for mutual TLS with OpenTofu and was not found on PATH")
    cmd = [openssl, "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
           "-nodes", "-keyout", "-", "-out", "-", "-subj", "/CN=localhost", "-days", "30",
           "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "subjectAltName=DNS:localhost",
           "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
           "-addext", "extendedKeyUsage=serverAuth,clientAuth"]
    # The key goes to our pipe, never to a file. OPENSSL_CONF=/dev/null: the result must not depend
    # on the machine's openssl.cnf.
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OPENSSL_CONF": "/dev/null"})


def finish_server_cert(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """(key PEM, certificate PEM)."""
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise PluginError("openssl took more than 60 s to make a TLS certificate") from None
    text = out.decode("ascii", "replace")
    key = re.search(r"-----BEGIN PRIVATE KEY-----.*?-----END PRIVATE KEY-----\n?", text, re.S)
    cert = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", text, re.S)
    if proc.returncode != 0 or not key or not cert:
        lines = err.decode(errors="replace").strip().splitlines()
        raise PluginError(f"openssl could not make a TLS certificate: {lines[-1] if lines else proc.returncode}")
    return key.group(0).encode(), cert.group(0).encode()


def handshake_line(socket_path: str, cert_der: bytes | None) -> str:
    fields = [str(CORE_PROTOCOL_VERSION), str(APP_PROTOCOL_VERSION), "unix", socket_path, "grpc"]
    if cert_der is not None:
        fields.append(base64.b64encode(cert_der).decode().rstrip("="))  # go-plugin wants no padding
    return "|".join(fields)


def serve(provider_factory: Callable[[], object]) -> int:
    """Run the plugin until told to stop; returns the exit status."""
    try:
        check_environment()
    except PluginError as exc:
        print(exc, file=sys.stderr)
        return 1

    # OpenTofu handles Ctrl-C itself (and calls StopProvider); the interrupt also reaches us through
    # the process group: ignore it, as go-plugin servers do. SIGTERM ends the plugin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    workdir = tempfile.mkdtemp(prefix="netpeer-tofu-", dir=os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or None)
    try:
        os.chmod(workdir, 0o700)
        return _serve_in(workdir, provider_factory, stop)
    except PluginError as exc:
        print(f"netpeer provider: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class TlsFront:
    """Mutual TLS in front of the gRPC server, with Python's ssl module (OpenSSL).

    Why not gRPC's own TLS: go-plugin's client certificate has a P-521 key, and the BoringSSL inside
    grpcio does not verify P-521 signatures in TLS 1.3 (the client then sends no certificate at all).
    So TLS ends here: each accepted connection must present exactly the certificate OpenTofu announced
    in PLUGIN_CLIENT_CERT; its plaintext is relayed to the gRPC server's socket, which sits in the same
    private directory. Runs an asyncio loop in a thread (gRPC imports asyncio anyway).
    """

    def __init__(self, listen_path: str, inner_path: str, context, expected_der: bytes):
        self.listen_path, self.inner_path = listen_path, inner_path
        self.context, self.expected_der = context, expected_der
        self.loop = None
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._quiet)
        started: list = []
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                started.append(self.loop.run_until_complete(
                    asyncio.start_unix_server(self._relay, path=self.listen_path, ssl=self.context)))
            except BaseException as exc:  # reported by start()
                started.append(exc)
                return
            finally:
                ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="tls-front", daemon=True)
        self._thread.start()
        ready.wait()
        if isinstance(started[0], BaseException):
            raise PluginError(f"cannot listen on {self.listen_path}: {started[0]}")
        self._server = started[0]

    def stop(self) -> None:
        """Stop accepting; let relays drain what the (already stopped) gRPC server last wrote, such
        as the answer to Shutdown, for up to a second."""
        import asyncio

        if self.loop is None or self._thread is None or not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(timeout=5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _close(self) -> None:
        import asyncio

        self._server.close()
        relays = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if relays:
            _, pending = await asyncio.wait(relays, timeout=1)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    @staticmethod
    def _quiet(loop, context) -> None:
        # A refused handshake is expected when someone else knocks; one line, no traceback.
        exc = context.get("exception")
        print(f"netpeer provider: TLS: {exc or context.get('message')}", file=sys.stderr)

    async def _relay(self, reader, writer) -> None:
        import asyncio

        ssl_object = writer.get_extra_info("ssl_object")
        peer = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if peer != self.expected_der:  # verified by OpenSSL already; this pins the exact certificate
            writer.close()
            return
        try:
            inner_reader, inner_writer = await asyncio.open_unix_connection(self.inner_path)
        except OSError:
            writer.close()
            return

        async def pump(src, dst) -> None:
            try:
                while data := await src.read(1 << 16):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, inner_writer), pump(inner_reader, writer))


def tls_context(key_pem: bytes, cert_pem: bytes, client_pem: str, workdir: str):
    """Server side: our certificate, and only the client certificate OpenTofu announced is trusted."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=client_pem)
    ctx.set_alpn_protocols(["h2"])  # gRPC clients insist on it
    # ssl loads keys from files only: hand it an anonymous in-memory file where the system has them,
    # else a file in our private directory, removed at once.
    chain = cert_pem + key_pem
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("netpeer-tofu-tls", os.MFD_CLOEXEC)
        try:
            view = memoryview(chain)
            while view:
                view = view[os.write(fd, view):]
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    else:
        path = os.path.join(workdir, "tls.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(chain)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
    return ctx


def _serve_in(workdir: str, provider_factory: Callable[[], object], stop: threading.Event) -> int:
    socket_path = os.path.join(workdir, "plugin.sock")
    client_pem = os.environ.get("PLUGIN_CLIENT_CERT")
    expected_der = cert_proc = None
    if client_pem:
        try:
            expected_der = pem_to_der(client_pem)
        except ValueError:
            raise PluginError("PLUGIN_CLIENT_CERT holds no PEM certificate") from None
        cert_proc = start_server_cert()
    try:
        provider = provider_factory()
        from .server import build_server

        server = build_server(provider, stop.set)
        tls = finish_server_cert(cert_proc) if cert_proc is not None else None
    finally:
        if cert_proc is not None and cert_proc.poll() is None:
            cert_proc.kill()
            cert_proc.wait()

    grpc_path = os.path.join(workdir, "grpc.sock") if tls is not None else socket_path
    if not server.add_insecure_port(f"unix:{grpc_path}"):
        raise PluginError(f"cannot listen on {grpc_path}")
    server.start()
    front = None
    try:
        if tls is not None:
            front = TlsFront(socket_path, grpc_path, tls_context(tls[0], tls[1], client_pem, workdir), expected_der)
            front.start()
        sys.stdout.write(handshake_line(socket_path, pem_to_der(tls[1]) if tls is not None else None) + "\n")
        sys.stdout.flush()
        # Anything printed later (by provider code) goes to stderr, which OpenTofu logs, rather than
        # into the pipe it read the handshake from.
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

        parent = os.getppid()
        while not stop.wait(1.0):
            if os.getppid() != parent:  # OpenTofu is gone: nobody will ever call Shutdown
                break
    finally:
        # The private directory goes first: go-plugin kills a plugin still running 2 s after Shutdown, and
        # open connections outlive their socket's path. Then gRPC (in-flight calls finish, their answers
        # reach the relays), then the TLS front.
        shutil.rmtree(workdir, ignore_errors=True)
        server.stop(grace=1).wait(3)
        if front is not None:
            front.stop()
    return 0


def main(provider_factory: Callable[[], object]) -> None:
    sys.exit(serve(provider_factory))
