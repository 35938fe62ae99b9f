"""An LSP client over TCP for the soak benchmark (soak.py): it answers the
daemon's requests and keeps account of every request it sends."""
import collections
import os
import socket
import threading
import time

from lsp_frames import frame, read_frames, socket_reader

REQUEST_CANCELLED = -32800
ANSWER_TIMEOUT_S = 300  # a request unanswered this long counts as never answered


class Pending:
    def __init__(self, method, expect_error=None):
        self.method = method
        self.expect_error = expect_error
        self.cancelled = False
        self.response = None
        self.done = threading.Event()


class Client:
    """An LSP client over TCP that answers the daemon's requests and accounts
    for every request it sends."""

    def __init__(self, name, port, token, root):
        self.name = name
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.write_lock = threading.Lock()
        self.cond = threading.Condition()
        self.next_id = 1
        self.pending = {}
        self.counts = collections.Counter()  # what the answers were
        self.failures = []
        self.events = collections.deque(maxlen=10000)  # (seq, time, method, params)
        self.seq = 0
        self.closed = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        capabilities = {
            "workspace": {"configuration": True, "inlayHint": {"refreshSupport": True},
                          "codeLens": {"refreshSupport": True}},
            "window": {"workDoneProgress": True},
            "textDocument": {"inlayHint": {}, "hover": {}},
        }
        reply = self.call("initialize", {"processId": os.getpid(), "rootUri": uri_of(root),
                                         "capabilities": capabilities,
                                         "initializationOptions": {"token": token,
                                                                   "protocol_version": 2}})
        if "error" in reply:
            raise RuntimeError(f"{name}: initialize failed: {reply['error']}")
        self.notify("initialized", {})

    def _send(self, message):
        with self.write_lock:
            self.sock.sendall(frame(message))

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, expect_error=None):
        with self.cond:
            rid = self.next_id
            self.next_id += 1
            pending = Pending(method, expect_error)
            self.pending[rid] = pending
            self.counts["sent " + method] += 1
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid, pending

    def call(self, method, params, timeout=ANSWER_TIMEOUT_S, expect_error=None):
        rid, pending = self.request(method, params, expect_error)
        if not pending.done.wait(timeout):
            raise RuntimeError(f"{self.name}: {method} unanswered after {timeout} s")
        return pending.response

    def cancel(self, rid):
        with self.cond:
            if rid in self.pending:
                self.pending[rid].cancelled = True
        self.notify("$/cancelRequest", {"id": rid})

    def fail(self, what):
        with self.cond:
            self.failures.append(f"{self.name}: {what}")

    def _read(self):
        for message in read_frames(socket_reader(self.sock)):
            if "method" in message and "id" in message:
                self._answer_server_request(message)
            elif "method" in message:
                self._notification(message)
            else:
                self._response(message)
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _answer_server_request(self, message):
        method = message["method"]
        if method == "workspace/configuration":
            result = [{} for _ in message["params"]["items"]]
        else:  # progress create, inlay hint and code lens refresh
            result = None
        try:
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        except OSError:  # a churning client closed its socket on purpose, mid-conversation
            pass

    def _notification(self, message):
        method, params = message["method"], message.get("params")
        with self.cond:
            self.seq += 1
            self.events.append((self.seq, time.monotonic(), method, params))
            self.cond.notify_all()

    def _response(self, message):
        rid = message.get("id")
        with self.cond:
            pending = self.pending.pop(rid, None)
            if pending is None:
                self.failures.append(f"{self.name}: a response for no pending request: {message}")
                return
            error = message.get("error")
            if error is None:
                if pending.expect_error is not None:
                    self.failures.append(f"{self.name}: {pending.method} should have failed "
                                         f"with {pending.expect_error}: {message}")
                self.counts["answered " + pending.method] += 1
                if pending.cancelled:
                    self.counts["answered before its cancel " + pending.method] += 1
            elif error["code"] == REQUEST_CANCELLED and pending.cancelled:
                self.counts["cancelled " + pending.method] += 1
            elif error["code"] == pending.expect_error:
                self.counts["expected error " + pending.method] += 1
            else:
                self.failures.append(f"{self.name}: {pending.method} failed: {error}")
            pending.response = message
            pending.done.set()
            self.cond.notify_all()

    def wait_event(self, predicate, after_seq, timeout):
        """The first notification after `after_seq` that satisfies predicate(method, params)."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for seq, at, method, params in self.events:
                    if seq > after_seq and predicate(method, params):
                        return at, method, params
                left = end - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self.cond.wait(left)

    def unanswered(self):
        with self.cond:
            return dict(self.pending)

    def close(self):
        try:
            self.call("shutdown", None, timeout=30)
            self.notify("exit", None)
        except (OSError, RuntimeError) as error:
            self.fail(f"shutdown: {error}")
        with self.cond:
            self.cond.wait_for(lambda: self.closed, 10)
            if not self.closed:
                self.failures.append(f"{self.name}: still connected 10 s after exit")
        self.sock.close()


def uri_of(path):
    return "file://" + path
