"""Soak benchmark of `wavecast serve`: thousands of saves with edits, cancels
and GPU-set changes from two TCP clients at once, while a third connects and
disconnects (with and without the token), and the worker is killed mid-trace
or runs out of memory now and then.

    python3 bench/server/soak.py --minutes 10     # 2,000 saves, the full soak
    python3 bench/server/soak.py --minutes 0.5 --saves 60 --warmup-results 6
                                                  # quick (ctest serve_soak_short)

It prints a report and exits 1 when a goal is missed:
  - the daemon's RSS stays within +-10% of its value after warm-up (150
    distinct results, which fill the result cache, then the first fifth of the
    load; every sample after it, and the end); unchecked after a shorter warm-up;
  - no file descriptor, thread or worker process leaks: counted at the quiet
    points (clients paused, analyses done) after warm-up, they end as they were;
  - every request is answered, with a result or, for a wavecast/analyze whose
    $/cancelRequest came first, -32800; strangers are disconnected;
  - after the worker is SIGKILLed mid-trace, and after a script runs it out of
    memory, the next analysis succeeds.
Times (recovery, run length) are reported, never asserted.
"""
import argparse
import collections
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from lsp_client import Client, uri_of
from lsp_frames import frame, read_frames, socket_reader
from serve_daemon import Daemon
from soak_report import FULL_CACHE_RESULTS, report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVALID_PARAMS = -32602
TARGET_SETS = [["H100", "A100", "T4"], ["H100", "T4"], ["A100-SXM4-80GB", "L4"], ["T4"]]
# The worker's progress once the script itself runs (before: "starting worker", "loading script").
TRACING_PROGRESS = ("building model", "creating inputs", "tracing forward", "tracing backward",
                    "tracing optimizer")


class Document:
    """A training script on disk that a client edits and saves."""

    def __init__(self, path, text):
        self.path = path
        self.uri = uri_of(path)
        self.base = text
        self.version = 1
        self.edit = 0
        self.text = text
        with open(path, "w") as f:
            f.write(text)

    def next_text(self, rng, unique):
        # Mostly one of a few variants (their results come from the cache once
        # seen), sometimes new content; comments above the model move every line.
        self.edit += 1
        variant = rng.randrange(6)
        header = ("# soak edit %d\n" % self.edit if unique else "# soak variant %d\n" % variant)
        header += "#\n" * (variant % 3)
        return header + self.base


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.folder = tempfile.mkdtemp(prefix="wavecast-soak-")
        sample = open(args.sample).read()
        os.makedirs(os.path.join(self.folder, "a"))
        os.makedirs(os.path.join(self.folder, "b"))
        self.daemon = Daemon(args.wavecast, self.folder, args.debounce_ms)
        self.a = Client("client A", self.daemon.port, self.daemon.token,
                        os.path.join(self.folder, "a"))
        self.b = Client("client B", self.daemon.port, self.daemon.token,
                        os.path.join(self.folder, "b"))
        self.docs = {
            self.a: Document(os.path.join(self.folder, "a", "train.py"), sample),
            self.b: Document(os.path.join(self.folder, "b", "train.py"), sample),
        }
        # Scripts that fail only while their switch file exists: a GPU-set change
        # re-analyses every entry, and these must not stall the load meanwhile.
        # One sleeps in the model provider (a worker surely mid-trace to kill);
        # the other maps address space until the worker's memory limit refuses more.
        self.switch = os.path.join(self.folder, "fail-now")
        self.slow = Document(os.path.join(self.folder, "a", "slow.py"), sample.replace(
            "def wavecast_model():\n",
            "def wavecast_model():\n    import os, time\n"
            f"    if os.path.exists({self.switch!r}):\n        time.sleep(60)\n"))
        self.oom = Document(os.path.join(self.folder, "a", "oom.py"), sample.replace(
            "def wavecast_model():\n",
            "def wavecast_model():\n    import os\n    hog = []\n"
            f"    while os.path.exists({self.switch!r}):\n"
            "        hog.append(bytes(1 << 30))\n"))
        self.saves = collections.Counter()
        self.churn = collections.Counter()
        self.failures = []
        self.samples = []  # (active seconds, rss KiB, fds, threads)
        self.quiet_points = []  # (label, rss KiB, fds, threads, children)
        self.recoveries = []  # (what, error kind, seconds from the failure to a good result)
        self.running = threading.Event()
        self.stop = threading.Event()
        self.parked = collections.Counter()
        self.ended = set()  # load threads that are done
        self.park_cond = threading.Condition()
        self.active_start = None
        self.paused_total = 0.0
        self.pause_began = None

    # Time that excludes the pauses for recovery tests, so the load keeps its pace.
    def active_seconds(self):
        paused = self.paused_total + (time.monotonic() - self.pause_began
                                      if self.pause_began is not None else 0)
        return time.monotonic() - self.active_start - paused

    def load(self, who, loop, *args):
        try:
            loop(*args)
        finally:
            with self.park_cond:
                self.ended.add(who)
                self.park_cond.notify_all()

    def wait_running(self, who):
        if self.running.is_set():
            return
        with self.park_cond:
            self.parked[who] += 1
            self.park_cond.notify_all()
        self.running.wait()
        with self.park_cond:
            self.parked[who] -= 1

    def sleep_until(self, active_time, who):
        while not self.stop.is_set():
            self.wait_running(who)
            left = active_time - self.active_seconds()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    # -- the two editing clients ------------------------------------------------

    def edit_loop(self, client, saves, duration, seed):
        rng = random.Random(seed)
        doc = self.docs[client]
        # Bursts of quick saves (each cancels the one before) between pauses
        # long enough for analyses to finish; the mean gap spreads `saves` over `duration`.
        gaps = [rng.choice([0.05, 0.05, 0.05, 0.2, 0.5, 1.0, 2.5, 4.0]) for _ in range(saves)]
        scale = duration / sum(gaps)
        at = 0.0
        for step in range(saves):
            at += gaps[step] * scale
            self.sleep_until(at, client.name)
            if self.stop.is_set():
                return
            try:
                self.edit_step(client, doc, rng, step)
            except OSError as error:
                client.fail(f"step {step}: {error}")
                return

    def edit_step(self, client, doc, rng, step):
        roll = rng.random()
        if roll < 0.85:  # edit, then save
            self.edit_and_save(client, doc, rng, unique=rng.random() < 0.3)
            self.saves["with an edit"] += 1
        elif roll < 0.93:  # save unchanged: answered from the cache
            client.notify("textDocument/didSave", {"textDocument": {"uri": doc.uri}})
            self.saves["unchanged"] += 1
        else:  # type without saving, save on the next step
            doc.version += 1
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [{"text": "# typing\n" + doc.text}]})
            doc.version += 1
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [{"text": doc.text}]})
            client.notify("textDocument/didSave", {"textDocument": {"uri": doc.uri}})
            self.saves["after unsaved typing"] += 1
        # What an editor asks after every change.
        line = rng.randrange(40)
        client.request("textDocument/inlayHint", {
            "textDocument": {"uri": doc.uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 60, "character": 0}}})
        client.request("textDocument/hover", {"textDocument": {"uri": doc.uri},
                                              "position": {"line": line, "character": 4}})
        client.request("textDocument/codeLens", {"textDocument": {"uri": doc.uri}})
        roll = rng.random()
        if roll < 0.06:  # analyze now; half of them cancelled a moment later
            params = {"uri": doc.uri}
            if rng.random() < 0.3:
                params["batch_size"] = rng.choice([16, 32, 64])
            rid, _ = client.request("wavecast/analyze", params)
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, 0.3))
                client.cancel(rid)
        elif roll < 0.09:  # another GPU set: every document is analysed again
            client.request("wavecast/setTargets", {"gpus": rng.choice(TARGET_SETS)})
        elif roll < 0.10:
            client.request("wavecast/setTargets", {"gpus": ["H10"]}, expect_error=INVALID_PARAMS)
        elif roll < 0.12:
            client.request("wavecast/setBatchSize",
                           {"uri": doc.uri, "batch_size": rng.choice([None, 32, 64])})
        elif roll < 0.14:
            client.request("wavecast/results", {"uri": doc.uri})
        elif roll < 0.15:
            client.request("wavecast/listGpus", None)

    # -- a third client that comes and goes ------------------------------------

    def churn_loop(self, duration):
        rng = random.Random(self.args.seed + 7)
        at = 0.0
        while not self.stop.is_set():
            at += rng.uniform(1, 6)
            if at > duration:
                return
            self.sleep_until(at, "churn")
            if self.stop.is_set():
                return
            kind = rng.choice(["visit", "vanish", "wrong token", "garbage"])
            try:
                self.churn_once(kind)
                self.churn[kind] += 1
            except (OSError, RuntimeError) as error:
                self.failures.append(f"churn ({kind}): {error}")

    def churn_once(self, kind):
        port, token = self.daemon.port, self.daemon.token
        if kind in ("visit", "vanish"):
            client = Client("churn", port, token, self.folder)
            gpus = client.call("wavecast/listGpus", None, timeout=60)
            if "result" not in gpus or not gpus["result"]["gpus"]:
                raise RuntimeError(f"listGpus: {gpus}")
            client.call("wavecast/results", {"uri": self.docs[self.a].uri}, timeout=60)
            if kind == "visit":
                client.close()
            else:  # gone without shutdown, mid-conversation
                client.request("textDocument/hover", {
                    "textDocument": {"uri": self.docs[self.a].uri},
                    "position": {"line": 1, "character": 1}})
                client.sock.close()
            self.failures.extend(client.failures)
            return
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(30)
        if kind == "wrong token":
            sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"capabilities": {},
                                           "initializationOptions": {"token": "guess"}}}))
        else:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        replies = list(read_frames(socket_reader(sock)))  # ends when the daemon closes the connection
        sock.close()
        if not replies or "error" not in replies[0]:
            raise RuntimeError(f"a stranger got {replies} instead of an error and a closed socket")

    # -- quiet points and recovery -------------------------------------------------

    def pause(self):
        self.running.clear()
        self.pause_began = time.monotonic()
        with self.park_cond:
            if not self.park_cond.wait_for(
                    lambda: sum(self.parked.values()) + len(self.ended) >= 3, 120):
                self.failures.append("the load did not pause within 120 s")

    def resume(self):
        self.paused_total += time.monotonic() - self.pause_began
        self.pause_began = None
        self.running.set()

    def settle(self):
        """Waits until every analysis is done: analyze requests queue behind
        whatever is pending and are answered once their own analysis is."""
        for client, doc in self.docs.items():
            reply = client.call("wavecast/analyze", {"uri": doc.uri})
            state = reply.get("result", {}).get("state")
            if state != "ready":
                self.failures.append(f"settle: {doc.path} is {state}: {reply}")
        end = time.monotonic() + 120
        while time.monotonic() < end:
            unanswered = sum(len(c.unanswered()) for c in self.docs)
            if unanswered == 0 and self.daemon.worker_pid() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # writes in flight reach the clients

    def quiet_point(self, label):
        self.settle()
        children = self.daemon.children()
        point = (label, self.daemon.rss_kib(), self.daemon.fds(), self.daemon.threads(),
                 len(children), sum(1 for c in children if c[2] == "Z"))
        self.quiet_points.append(point)
        return point

    def analyze_expect(self, client, doc, states, what):
        t0 = time.monotonic()
        reply = client.call("wavecast/analyze", {"uri": doc.uri})
        result = reply.get("result") or {}
        if result.get("state") not in states:
            self.failures.append(f"{what}: {doc.path} is {result.get('state')}, wanted "
                                 f"{'/'.join(states)}: {json.dumps(result)[:400]}")
        return time.monotonic() - t0, result

    @staticmethod
    def edit_and_save(client, doc, rng, unique):
        """Writes the document's next text to disk and tells the daemon: change, save."""
        doc.text = doc.next_text(rng, unique=unique)
        with open(doc.path, "w") as f:
            f.write(doc.text)
        doc.version += 1
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": doc.uri, "version": doc.version},
            "contentChanges": [{"text": doc.text}]})
        client.notify("textDocument/didSave", {"textDocument": {"uri": doc.uri}})

    def fresh_edit(self, client):
        doc = self.docs[client]
        self.edit_and_save(client, doc, self.rng, unique=True)
        return doc

    def arm(self, doc):
        """Makes `doc` fail when analysed next: new content (no cached result) and the switch."""
        doc.edit += 1
        with open(doc.path, "w") as f:
            f.write("# failing run %d\n" % doc.edit + doc.base)
        open(self.switch, "w").close()

    def disarm(self):
        if os.path.exists(self.switch):
            os.remove(self.switch)

    def recover_from_kill(self):
        client = self.a
        self.arm(self.slow)
        seq = client.seq
        _, pending = client.request("wavecast/analyze", {"uri": self.slow.uri})
        seen = client.wait_event(
            lambda m, p: m == "wavecast/status" and p.get("message") in TRACING_PROGRESS, seq, 120)
        if seen is None:
            self.failures.append("kill: the slow script never started tracing")
            return
        time.sleep(0.3)
        worker = self.daemon.worker_pid()
        if worker is None:
            self.failures.append(f"kill: no single live worker: {self.daemon.children()}")
            return
        os.kill(worker, signal.SIGKILL)
        killed_at = time.monotonic()
        self.disarm()
        if not pending.done.wait(60):
            self.failures.append("kill: the analysis whose worker died was never answered")
            return
        result = pending.response.get("result") or {}
        kind = (result.get("error") or {}).get("kind")
        if result.get("state") != "error" or kind not in ("out_of_memory", "worker_crashed"):
            self.failures.append(f"kill: wanted a worker error, got {json.dumps(result)[:400]}")
        reported = time.monotonic() - killed_at
        self.fresh_edit(client)
        took, _ = self.analyze_expect(client, self.docs[client], ["ready"], "after the kill")
        self.recoveries.append(("worker SIGKILLed mid-trace", kind, reported,
                                time.monotonic() - killed_at, took))

    def recover_from_oom(self):
        client = self.a
        self.arm(self.oom)
        t0 = time.monotonic()
        _, result = self.analyze_expect(client, self.oom, ["error"], "out of memory")
        self.disarm()
        kind = (result.get("error") or {}).get("kind")
        if kind != "out_of_memory":
            self.failures.append(f"oom: wanted out_of_memory, got {json.dumps(result)[:400]}")
        failed_at = time.monotonic()
        self.fresh_edit(client)
        took, _ = self.analyze_expect(client, self.docs[client], ["ready"], "after out of memory")
        self.recoveries.append(("script out of memory", kind, failed_at - t0,
                                time.monotonic() - failed_at, took))

    # -- the run ---------------------------------------------------------------------

    def monitor(self):
        while not self.stop.is_set():
            if self.running.is_set():
                try:
                    self.samples.append((self.active_seconds(), self.daemon.rss_kib(),
                                         self.daemon.fds(), self.daemon.threads()))
                except OSError:
                    return
            time.sleep(1)

    def run(self):
        args = self.args
        duration = args.minutes * 60
        # The first analysis loads torch in the worker: done before the clock starts.
        for client, doc in self.docs.items():
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": doc.uri, "languageId": "python", "version": doc.version, "text": doc.text}})
        self.settle()
        # Fill the result cache (64 entries) with distinct results, so that the
        # RSS after warm-up already holds a full cache.
        fill_start = time.monotonic()
        for i in range(args.warmup_results):
            client = self.a if i % 2 == 0 else self.b
            self.fresh_edit(client)
            self.analyze_expect(client, self.docs[client], ["ready"], "warm-up")
        self.warmup_fill_s = time.monotonic() - fill_start
        for doc in (self.slow, self.oom):
            self.a.notify("textDocument/didOpen", {"textDocument": {
                "uri": doc.uri, "languageId": "python", "version": 1, "text": doc.text}})
        self.active_start = time.monotonic()
        self.running.set()
        per_client = args.saves // 2
        threads = [
            threading.Thread(target=self.load, args=(self.a.name, self.edit_loop, self.a,
                                                     per_client, duration, 1)),
            threading.Thread(target=self.load, args=(self.b.name, self.edit_loop, self.b,
                                                     args.saves - per_client, duration, 2)),
            threading.Thread(target=self.load, args=("churn", self.churn_loop, duration)),
            threading.Thread(target=self.monitor, daemon=True),
        ]
        for t in threads:
            t.start()
        # Quiet points after warm-up (the first fifth) and at each fifth after it;
        # recovery tests at each of them.
        checkpoints = [duration * k / 5 for k in range(1, 5)]
        self.warmup_s = checkpoints[0]
        for k, at in enumerate(checkpoints):
            while self.active_seconds() < at and any(t.is_alive() for t in threads[:3]):
                time.sleep(0.1)
            self.pause()
            self.quiet_point("after warm-up" if k == 0 else f"at {k + 1}/5")
            try:
                self.recover_from_kill() if k % 2 == 0 else self.recover_from_oom()
                if k == 0 and args.minutes < 2:
                    self.recover_from_oom()  # a short run still tries both
            finally:
                self.disarm()
            self.resume()
        for t in threads[:3]:
            t.join()
        self.stop.set()
        self.running.set()
        self.end = self.quiet_point("end")
        self.wall_s = time.monotonic() - self.active_start

    def check_answers(self):
        for client in self.docs:
            left = client.unanswered()
            for rid, p in left.items():
                self.failures.append(f"{client.name}: {p.method} (id {rid}) never answered")
            self.failures.extend(client.failures)

    def finish(self):
        for client in self.docs:
            client.close()
        self.daemon.proc.send_signal(signal.SIGTERM)
        try:
            code = self.daemon.proc.wait(30)
            if code != 0:
                self.failures.append(f"the daemon exited with {code} on SIGTERM")
        except subprocess.TimeoutExpired:
            self.failures.append("the daemon did not exit within 30 s of SIGTERM")
            self.daemon.proc.kill()
        log = self.daemon.log_text()
        for line in log.splitlines():
            if "internal error" in line or "failed:" in line:
                self.failures.append("daemon log: " + line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wavecast", default=os.path.join(ROOT, "build", "bin", "wavecast"))
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--saves", type=int, default=2000)
    parser.add_argument("--sample", default=os.path.join(ROOT, "samples", "small_cnn.py"))
    parser.add_argument("--debounce-ms", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--warmup-results", type=int, default=FULL_CACHE_RESULTS,
                        help="distinct results analysed before the load starts; fewer than "
                             f"{FULL_CACHE_RESULTS} leave the RSS unchecked")
    parser.add_argument("--keep", action="store_true", help="keep the folder with the daemon log")
    args = parser.parse_args()
    soak = Soak(args)
    try:
        soak.run()
    except (OSError, RuntimeError) as error:
        soak.failures.append(f"the run stopped early: {error}")
    try:
        soak.check_answers()
    finally:
        soak.stop.set()
        soak.running.set()
        soak.finish()
    report(soak)
    if args.keep or soak.failures:
        print(f"files and the daemon's log: {soak.folder}")
    else:
        shutil.rmtree(soak.folder, ignore_errors=True)
    return 1 if soak.failures else 0


if __name__ == "__main__":
    sys.exit(main())
