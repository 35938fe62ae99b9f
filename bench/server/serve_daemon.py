"""A `wavecast serve` process listening on TCP for the soak benchmark (soak.py),
and what /proc says about it: RSS, threads, descriptors, worker processes."""
import os
import subprocess
import time


class Daemon:
    def __init__(self, wavecast, folder, debounce_ms):
        self.token_file = os.path.join(folder, "token")
        with open(self.token_file, "w") as f:
            f.write("soak-" + os.urandom(8).hex() + "\n")
        os.chmod(self.token_file, 0o600)
        self.token = open(self.token_file).read().strip()
        self.log = open(os.path.join(folder, "serve.log"), "w+")
        self.proc = subprocess.Popen(
            [wavecast, "serve", "--listen", "127.0.0.1:0", "--token-file", self.token_file,
             "--debounce-ms", str(debounce_ms), "--gpu", "H100,A100,T4"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        self.pid = self.proc.pid
        self.port = None
        end = time.monotonic() + 60
        while self.port is None and time.monotonic() < end:
            self.log.seek(0)
            for line in self.log:
                if "listening on 127.0.0.1:" in line:
                    self.port = int(line.split("listening on 127.0.0.1:")[1].split(";")[0])
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("wavecast serve did not announce its port:\n" + self.log_text())

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def status_field(self, name):
        """An integer field of /proc/PID/status ("VmRSS", "Threads"); 0 when absent."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
        return 0

    def rss_kib(self):
        return self.status_field("VmRSS")

    def threads(self):
        return self.status_field("Threads")

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def children(self):
        """(pid, comm, state) of the daemon's child processes."""
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) == self.pid:
                out.append((int(entry), comm, fields[0]))
        return out

    def worker_pid(self):
        workers = [pid for pid, comm, state in self.children()
                   if comm.startswith("wavecast-worke") and state != "Z"]
        return workers[0] if len(workers) == 1 else None
