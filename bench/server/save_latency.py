"""Save -> results latency of `wavecast serve`, measured as an editor sees it.

For each sample: start the daemon, initialize, open the file and save it at once
(the first results after start), then RUNS times: edit the iteration's code on
disk, send textDocument/didSave and time until wavecast/resultsChanged says
"ready" and the workspace/inlayHint/refresh request that follows arrives. A
model edit (the first provider's code) is timed the same way. Then a second
daemon starts on the trace store the first one filled (an editor restarted on the
same script) and the first results after its start are timed again. Each sample
gets an empty store of its own. Prints medians (docs/performance.md has the
figures and the machine).

    /usr/bin/python3 bench/server/save_latency.py build/bin/wavecast [RUNS] [SAMPLE.py ...]
        [--first-save-after SECONDS]

SAMPLE defaults to samples/resnet50.py and samples/gpt2.py; RUNS to 7. With
--first-save-after, the file is opened and first saved that long after the
daemon started (an editor's user reads before saving), instead of at once.
"""
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from lsp_frames import frame, read_frames

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "..", "samples")


class Daemon:
    def __init__(self, wavecast, folder, store):
        self.started = time.monotonic()
        self.process = subprocess.Popen([wavecast, "serve", "--trace-store", store], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.messages = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.request(1, "initialize", {
            "processId": None, "rootUri": "file://" + folder,
            "capabilities": {"workspace": {"inlayHint": {"refreshSupport": True}}}})
        self.wait(lambda m: m.get("id") == 1)
        self.notify("initialized", {})

    def _read(self):
        for message in read_frames(lambda: self.process.stdout.read1(65536)):
            self.messages.put((time.monotonic(), message))

    def send(self, message):
        self.process.stdin.write(frame(dict(message, jsonrpc="2.0")))
        self.process.stdin.flush()

    def request(self, id_, method, params):
        self.send({"id": id_, "method": method, "params": params})

    def notify(self, method, params):
        self.send({"method": method, "params": params})

    def wait(self, predicate, timeout=300):
        end = time.monotonic() + timeout
        while True:
            at, message = self.messages.get(timeout=max(0.01, end - time.monotonic()))
            if message.get("id") is not None and "method" in message:  # a request to the editor
                self.send({"id": message["id"], "result": None})
            if predicate(message):
                return at, message

    def saved(self, uri):
        """Sends didSave; returns (seconds to resultsChanged ready, to the inlay refresh)."""
        sent = time.monotonic()
        self.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        ready_at, message = self.wait(lambda m: m.get("method") == "wavecast/resultsChanged"
                                      and m["params"]["state"] in ("ready", "error"))
        if message["params"]["state"] != "ready":
            raise RuntimeError(f"the analysis failed: {message}")
        refresh_at, _ = self.wait(lambda m: m.get("method") == "workspace/inlayHint/refresh")
        return ready_at - sent, refresh_at - sent

    def stop(self):
        self.request(99, "shutdown", None)
        self.notify("exit", None)
        self.process.wait(timeout=30)


def edit(path, pattern, replacement):
    with open(path) as f:
        text = f.read()
    changed = re.sub(pattern, replacement, text, count=1)
    assert changed != text, f"{pattern!r} not found in {path}"
    with open(path, "w") as f:
        f.write(changed)


def first_results(wavecast, folder, store, path, first_save_after):
    """Starts a daemon, opens and saves `path`: (daemon, seconds from its start, from the save)."""
    uri = "file://" + path
    daemon = Daemon(wavecast, folder, store)
    time.sleep(max(0.0, first_save_after - (time.monotonic() - daemon.started)))
    with open(path) as f:
        daemon.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": f.read()}})
    first, _ = daemon.saved(uri)
    return daemon, time.monotonic() - daemon.started, first


def measure(wavecast, sample, runs, first_save_after=0.0):
    folder = tempfile.mkdtemp()
    try:
        path = os.path.join(folder, "train.py")
        store = os.path.join(folder, "trace-store")
        shutil.copy(sample, path)
        uri = "file://" + path
        daemon, first_after_start, first = first_results(wavecast, folder, store, path, first_save_after)
        iteration, refresh = [], []
        for run in range(runs):
            time.sleep(0.5)
            # An edit inside the iteration provider: the learning rate its optimizer gets.
            edit(path, r"lr=[0-9.e-]+", f"lr={0.1 + 0.01 * (run + 1):.2f}")
            ready, inlay = daemon.saved(uri)
            iteration.append(ready)
            refresh.append(inlay)
        model = []
        for run in range(max(1, runs // 2)):
            time.sleep(0.5)
            # An edit of the model provider: a comment line that moves the model's code.
            edit(path, r"\ndef wavecast_model\(", f"\n# model edit {run}\ndef wavecast_model(")
            ready, _ = daemon.saved(uri)
            model.append(ready)
        daemon.stop()
        # The editor restarted: the last content's trace is in the store.
        daemon, restarted_after_start, _ = first_results(wavecast, folder, store, path, first_save_after)
        daemon.stop()
        return first_after_start, first, iteration, refresh, model, restarted_after_start
    finally:
        shutil.rmtree(folder)


def main():
    args = sys.argv[1:]
    first_save_after = 0.0
    if "--first-save-after" in args:
        at = args.index("--first-save-after")
        first_save_after = float(args[at + 1])
        del args[at:at + 2]
    wavecast = args[0]
    runs = int(args[1]) if len(args) > 1 else 7
    samples = args[2:] or [os.path.join(SAMPLES, "resnet50.py"), os.path.join(SAMPLES, "gpt2.py")]
    for sample in samples:
        start, first, iteration, refresh, model, restarted = measure(wavecast, sample, runs, first_save_after)
        ms = lambda values: " ".join(f"{v * 1000:.0f}" for v in values)
        print(f"{os.path.basename(sample)}: first results {start:.2f} s after the daemon started "
              f"({first * 1000:.0f} ms after the first save); after a restart, from the trace "
              f"the first daemon stored: {restarted:.2f} s")
        print(f"  iteration edit, save -> resultsChanged: median {statistics.median(iteration) * 1000:.0f} ms "
              f"[{ms(iteration)}]; -> inlay refresh: median {statistics.median(refresh) * 1000:.0f} ms")
        print(f"  model edit, save -> resultsChanged: median {statistics.median(model) * 1000:.0f} ms "
              f"[{ms(model)}]")


if __name__ == "__main__":
    main()
