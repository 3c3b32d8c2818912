"""A minimal RESP2 client for the benchmark drivers (bench_replication_run.py,
bench_failover.py): one blocking socket, commands pipelined or one at a time, error replies
returned as values so a pipeline's answers stay in step. Stdlib only, so drivers add no load
of their own beyond the commands they send.
"""
import socket

REPLY_MAX = 1 << 20  # a reply larger than this is not one these drivers ask for
ARRAY_MAX = 1 << 16  # likewise for an array's length


class ReplyError(Exception):
    """An error reply (`-ERR ...`, `-MOVED ...`); returned by `read`, raised by `call`."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    @property
    def code(self) -> str:
        return self.text.split(" ", 1)[0]


class Conn:
    def __init__(self, port: int, timeout: float = 10.0, host: str = "127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk
        if len(self.buf) > REPLY_MAX + 64:
            raise ValueError("reply too large")

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def send(self, *commands) -> None:
        """Sends commands (each a tuple of str) without reading their replies."""
        out = []
        for args in commands:
            out.append(f"*{len(args)}\r\n".encode())
            for a in args:
                b = a.encode() if isinstance(a, str) else a
                out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))

    def read(self):
        """One reply: str, int, None, list, or a ReplyError (returned, not raised)."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            if n > REPLY_MAX:
                raise ValueError("reply too large")
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            if kind == b"=":  # RESP3 verbatim string: "txt:" prefix
                data = data[4:]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            if n > ARRAY_MAX:
                raise ValueError("array too long")
            return [self.read() for _ in range(n)]
        raise ValueError(f"unexpected reply {line[:40]!r}")

    def call(self, *args):
        self.send(args)
        reply = self.read()
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def info(self, section: str) -> dict:
        fields = {}
        for line in self.call("INFO", section).splitlines():
            if line and not line.startswith("#") and ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v.strip()
        return fields
