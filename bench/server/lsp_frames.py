"""LSP base-protocol framing for the daemon benchmarks: Content-Length frames out
of JSON messages, and messages back out of a byte stream."""
import json


def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frames(read_chunk):
    """Yields message bodies read with `read_chunk()` (bytes; empty at the end of
    the stream) until the peer closes or sends a frame without a length."""
    buffer = b""

    def more():
        nonlocal buffer
        chunk = read_chunk()
        buffer += chunk
        return bool(chunk)

    while True:
        while b"\r\n\r\n" not in buffer:
            if not more():
                return
        header, buffer = buffer.split(b"\r\n\r\n", 1)
        length = None
        for line in header.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length is None:
            return
        while len(buffer) < length:
            if not more():
                return
        yield json.loads(buffer[:length])
        buffer = buffer[length:]


def socket_reader(sock):
    """read_chunk for a socket: an error reads as the end of the stream."""
    def read_chunk():
        try:
            return sock.recv(65536)
        except OSError:
            return b""
    return read_chunk
