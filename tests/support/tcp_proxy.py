"""A TCP forwarder in front of a live server, to fail it as a killed server fails.

:meth:`TCPProxy.kill` closes the listening port and drops every open connection: a
client then sees what it sees when the server is killed (connections reset, then
refused). :meth:`TCPProxy.start` opens the same port again. The server behind it keeps
running, so a test of the client's resume does not pay for a server restart.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TCPProxy:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target>``; ``url`` ends in ``/v1``."""

    def __init__(self, target: int):
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen()
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def kill(self) -> None:
        """Refuse new connections and reset the open ones."""
        if self._listener is not None:
            _close(self._listener)  # shutdown wakes the thread blocked in accept()
            self._listener = None
        with self._lock:
            for conn in self._open:
                _close(conn)
            self._open.clear()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                client, _ = sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
