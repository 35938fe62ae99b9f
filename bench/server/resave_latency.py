"""Re-save latency of the daemon: save, save again while that analysis is
tracing (it is cancelled), and time from the second save until results are
ready. Medians over RUNS on the GPT-2 sample.

    /usr/bin/python3 bench/server/resave_latency.py build/bin/wavecast 5

SLEEP (seconds, default 0.6) is how long after the first save's analysis
started the second save comes."""
import os, shutil, subprocess, sys, tempfile, threading, time, queue

from lsp_frames import frame, read_frames

wavecast, runs = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp()
path = os.path.join(d, "train.py")
shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "gpt2.py"), path)
uri = "file://" + path
p = subprocess.Popen([wavecast, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
q = queue.Queue()
def reader():
    for message in read_frames(lambda: p.stdout.read1(65536)):
        q.put((time.monotonic(), message))
threading.Thread(target=reader, daemon=True).start()
def send(msg):
    p.stdin.write(frame(msg)); p.stdin.flush()
def wait(pred, timeout=120):
    end = time.monotonic() + timeout
    while True:
        t, m = q.get(timeout=max(0.01, end - time.monotonic()))
        if m.get("id") is not None and "method" in m:  # server request: answer null
            send({"jsonrpc": "2.0", "id": m["id"], "result": None})
        if pred(m): return t, m
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": "file://" + d, "capabilities": {}}})
wait(lambda m: m.get("id") == 1)
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": open(path).read()}}})
ready = lambda m: m.get("method") == "wavecast/resultsChanged" and m["params"]["state"] in ("ready", "error")
# Warm-up: one full analysis.
send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
wait(ready)
times = []
for i in range(runs):
    with open(path, "a") as f: f.write(f"# edit {i}a\n")
    send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
    wait(lambda m: m.get("method") == "wavecast/resultsChanged" and m["params"]["state"] == "analyzing")
    time.sleep(float(os.environ.get("SLEEP", "0.6")))  # the analysis is tracing now
    with open(path, "a") as f: f.write(f"# edit {i}b\n")
    t0 = time.monotonic()
    send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
    t1, m = wait(ready)
    times.append(t1 - t0)
send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"}); send({"jsonrpc": "2.0", "method": "exit"})
times.sort()
print("second save -> results (s):", " ".join("%.2f" % t for t in times), "median %.2f" % times[len(times)//2])
p.wait(timeout=10)
shutil.rmtree(d)
