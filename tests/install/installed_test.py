#!/usr/bin/env python3
"""Drives an installed wavecast the way a user would: a copy of the install
prefix in a fresh temporary folder (so nothing reaches the build tree by a
relative path), run from a working folder outside the checkout, with no
WAVECAST_* variables set. One case per ctest test:

  installed_test.py CASE --source DIR --build DIR --prefix DIR --version X.Y.Z
                         --configured-env DIR

install   cmake --install BUILD --prefix PREFIX and check the files (the fixture)
predict   --version, help, gpus, predict and trace on a copy of samples/small_cnn.py,
          with the default Python environment, the system's, and one without torch
broken    a missing GPU database, tracer or worker is an error naming the installed
          file, never a silent fall-back to the source tree
serve     an LSP session over stdio: initialize, wavecast/analyze, shutdown, exit
deb       cpack -G DEB: the two packages (wavecast, wavecast-learn), their files,
          dependencies and copyright, and a run from the main one's contents
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# What cmake --install must put in the prefix (the layout README.md documents).
INSTALLED_FILES = [
    "bin/wavecast",
    "lib/wavecast/wavecast-worker",
    "lib/wavecast/wavecast-learn",
    "share/wavecast/data/gpus.json",
    "share/wavecast/data/weights/manifest.json",
    "share/wavecast/data/weights/conv2d.0.json",
    "share/wavecast/data/weights/NOTICE",
    "share/wavecast/python/wavecast_tracer/__init__.py",
    "share/wavecast/python/wavecast_tracer/worker.py",
    "share/wavecast/samples/small_cnn.py",
    "share/doc/wavecast/README.md",
    "share/doc/wavecast/LICENSE",
    "share/doc/wavecast/copyright",
]
# What the wavecast-learn package holds; everything else is in the wavecast package.
LEARN_FILES = [
    "lib/wavecast/wavecast-learn",
    "share/doc/wavecast-learn/copyright",
]


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(args, cwd, env, stdin=None, timeout=300):
    print("$", " ".join(args), flush=True)
    done = subprocess.run(args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    return done


def user_environment(home):
    """The caller's environment without wavecast's overrides, HOME a fresh folder."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("WAVECAST_") and k != "XDG_CONFIG_HOME"}
    env["HOME"] = home
    return env


class Installed:
    """A relocated copy of the install prefix and a working folder beside it."""

    def __init__(self, options):
        self.options = options
        self.root = tempfile.mkdtemp(prefix="wavecast-installed-")
        self.prefix = os.path.join(self.root, "moved", "wavecast")
        shutil.copytree(options.prefix, self.prefix, symlinks=True)
        self.work = os.path.join(self.root, "work")
        os.makedirs(self.work)
        self.sample = os.path.join(self.work, "small_cnn.py")
        shutil.copy(os.path.join(options.source, "samples", "small_cnn.py"), self.sample)
        self.env = user_environment(self.work)
        self.wavecast = os.path.join(self.prefix, "bin", "wavecast")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, *args, timeout=300):
        done = run([self.wavecast, *args], self.work, self.env, timeout=timeout)
        self.expect_no_checkout_paths(done.stdout + done.stderr)
        return done

    def expect_no_checkout_paths(self, text):
        # The venv recorded at configure time may live in the build folder; it is
        # the documented default, so only paths other than it count.
        text = text.replace(self.options.configured_env, "<configured venv>")
        for tree in (self.options.source, self.options.build):
            check(tree not in text, f"output points into {tree}:\n{text}")


def expect_success(done, what):
    check(done.returncode == 0,
          f"{what} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")


def expect_error(done, *parts):
    check(done.returncode != 0, f"expected a failure, got:\n{done.stdout}")
    for part in parts:
        check(part in done.stderr, f"the error does not mention {part!r}:\n{done.stderr}")


def case_install(options):
    shutil.rmtree(options.prefix, ignore_errors=True)
    done = run(["cmake", "--install", options.build, "--prefix", options.prefix], cwd="/",
               env=os.environ.copy())
    expect_success(done, "cmake --install")
    for path in INSTALLED_FILES:
        check(os.path.isfile(os.path.join(options.prefix, path)), f"not installed: {path}")
    for path in ("bin/wavecast", "lib/wavecast/wavecast-worker", "lib/wavecast/wavecast-learn"):
        check(os.access(os.path.join(options.prefix, path), os.X_OK), f"not executable: {path}")
    # Only the user-facing command goes on PATH; nothing the build made for itself.
    check(sorted(os.listdir(os.path.join(options.prefix, "bin"))) == ["wavecast"],
          f"bin/ holds {os.listdir(os.path.join(options.prefix, 'bin'))}")
    size = 0
    for folder, dirs, files in os.walk(options.prefix):
        check("__pycache__" not in dirs, f"{folder} has a __pycache__")
        size += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    print(f"installed {size / 1e6:.1f} MB into {options.prefix}")


def trace_torch_version(installed, *extra):
    out = os.path.join(installed.work, "trace.json")
    done = installed.run("trace", installed.sample, "--out", out, *extra)
    expect_success(done, "wavecast trace")
    with open(out) as f:
        return json.load(f)["producer"]["torch"]


def case_predict(options):
    with Installed(options) as installed:
        done = installed.run("--version")
        expect_success(done, "wavecast --version")
        check(done.stdout == f"wavecast {options.version}\n", f"--version printed {done.stdout!r}")
        done = installed.run("help")
        expect_success(done, "wavecast help")
        check(f"wavecast {options.version} " in done.stdout, f"help lacks the version:\n{done.stdout}")

        done = installed.run("gpus")
        expect_success(done, "wavecast gpus")
        check("H100-SXM" in done.stdout and "T4" in done.stdout, done.stdout)

        done = installed.run("predict", "small_cnn.py", "--gpu", "H100,T4", "--json")
        expect_success(done, "wavecast predict")
        prediction = json.loads(done.stdout)
        check(prediction["gpus"] == ["H100-SXM", "T4"], prediction["gpus"])
        check("learned" in prediction["method"], f"no learned models: {prediction['method']}")
        check(all(s["iteration_ms"] > 0 for s in prediction["summaries"]), prediction["summaries"])
        busy = {s["gpu"]: s["gpu_ms"] for s in prediction["summaries"]}
        check(0 < busy["H100-SXM"] < busy["T4"], f"GPU busy times {busy}")
        lines = {line["line"] for line in prediction["lines"] if line["file"] == installed.sample}
        with open(installed.sample) as f:
            source = f.read().splitlines()
        conv = next(i + 1 for i, text in enumerate(source) if "self.conv1(x)" in text)
        step = next(i + 1 for i, text in enumerate(source) if "optimizer.step()" in text)
        check({conv, step} <= lines, f"lines {sorted(lines)} lack {conv} and {step}")

        # The default environment: the venv recorded at configure time when it exists.
        if os.path.isfile(os.path.join(options.configured_env, "pyvenv.cfg")):
            torch = trace_torch_version(installed)
            print(f"the default environment has torch {torch}")
            expected = run([os.path.join(options.configured_env, "bin", "python"), "-c",
                            "import torch; print(torch.__version__)"], "/", os.environ.copy())
            check(torch == expected.stdout.strip(), f"traced with torch {torch}, "
                  f"the configured venv has {expected.stdout.strip()}")
        else:
            # Never a silent switch to the system's torch: the missing venv is named.
            done = installed.run("predict", "small_cnn.py", "--gpu", "T4")
            expect_error(done, f"{options.configured_env}, is not on this machine", "--python-env system")
            print(f"no venv at {options.configured_env}: tracing says so and how to choose one")

        system = run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"], "/",
                     os.environ.copy())
        if system.returncode == 0:
            torch = trace_torch_version(installed, "--python-env", "system")
            check(torch == system.stdout.strip(), f"--python-env system traced with {torch}")
            print(f"the system python3 has torch {torch}")
        else:
            done = installed.run("predict", "small_cnn.py", "--gpu", "T4", "--python-env", "system")
            expect_error(done, "cannot import torch", "apt install python3-torch", "--python-env")

        bare = os.path.join(installed.work, "bare-venv")
        expect_success(run(["/usr/bin/python3", "-m", "venv", "--without-pip", bare], "/",
                           os.environ.copy()), "python3 -m venv")
        done = installed.run("predict", "small_cnn.py", "--gpu", "T4", "--python-env", bare)
        expect_error(done, f"{bare} has no torch", f"{bare}/bin/pip install torch")
        # A torch that cannot be imported fails in the worker's Python, which says what to do.
        site = os.path.join(bare, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                            "site-packages")
        os.makedirs(os.path.join(site, "torch"))
        with open(os.path.join(site, "torch", "__init__.py"), "w") as f:
            f.write("raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
        done = installed.run("predict", "small_cnn.py", "--gpu", "T4", "--python-env", bare)
        expect_error(done, f"cannot import torch from {site}/torch", "libtorch_cpu.so",
                     "pip install torch",
                     "apt install python3-torch", "--python-env VENV")


def case_broken(options):
    with Installed(options) as installed:
        data = os.path.join(installed.prefix, "share", "wavecast", "data")
        os.rename(os.path.join(data, "gpus.json"), os.path.join(data, "gpus.json.away"))
        expect_error(installed.run("gpus"), f"{data}/gpus.json is missing", "reinstall wavecast")
        os.rename(os.path.join(data, "gpus.json.away"), os.path.join(data, "gpus.json"))

        python = os.path.join(installed.prefix, "share", "wavecast", "python")
        shutil.rmtree(os.path.join(python, "wavecast_tracer"))
        expect_error(installed.run("predict", "small_cnn.py", "--gpu", "T4"),
                     f"the tracer package is missing from {python}")

        # The Debian packages ship the train/eval helper apart (wavecast-learn).
        learn = os.path.join(installed.prefix, "lib", "wavecast", "wavecast-learn")
        os.remove(learn)
        for command in ("train", "eval"):
            done = installed.run(command, "--fast")
            expect_error(done, f"'wavecast {command}' needs the helper {learn}, which is not "
                         "installed: sudo apt install wavecast-learn")
            check(done.stderr.count("\n") == 1, f"not one line:\n{done.stderr}")

        worker = os.path.join(installed.prefix, "lib", "wavecast", "wavecast-worker")
        os.remove(worker)
        expect_error(installed.run("predict", "small_cnn.py", "--gpu", "T4"),
                     f"'{worker}' is missing", "reinstall wavecast")


class LspClient:
    def __init__(self, process):
        self.process = process
        self.next_id = 1

    def send(self, message):
        body = json.dumps(dict(message, jsonrpc="2.0")).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self):
        headers = {}
        while True:
            line = self.process.stdout.readline()
            check(line, "the server closed its output")
            line = line.decode().strip()
            if not line:
                break
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
        return json.loads(self.process.stdout.read(int(headers["content-length"])))

    def request(self, method, params):
        id_ = self.next_id
        self.next_id += 1
        self.send({"id": id_, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == id_ and "method" not in message:
                check("error" not in message, f"{method} failed: {message}")
                return message["result"]
            if "id" in message and "method" in message:  # a request to the client
                self.send({"id": message["id"], "result": None})


def case_serve(options):
    with Installed(options) as installed:
        stderr = open(os.path.join(installed.root, "serve.err"), "w+")
        process = subprocess.Popen([installed.wavecast, "serve"], cwd=installed.work,
                                   env=installed.env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr)
        try:
            client = LspClient(process)
            work_uri = "file://" + installed.work
            result = client.request("initialize", {
                "processId": os.getpid(), "rootUri": work_uri, "capabilities": {},
                "initializationOptions": {"targets": ["H100", "T4"]}})
            check(result["serverInfo"] == {"name": "wavecast", "version": options.version},
                  f"serverInfo {result.get('serverInfo')}")
            check(result["capabilities"].get("inlayHintProvider"), result["capabilities"])
            client.send({"method": "initialized", "params": {}})
            analysis = client.request("wavecast/analyze", {"uri": "file://" + installed.sample})
            check(analysis["state"] == "ready", f"analysis: {json.dumps(analysis)[:2000]}")
            summaries = analysis["prediction"]["summaries"]
            check([s["gpu"] for s in summaries] == ["H100-SXM", "T4"], summaries)
            check(all(s["iteration_ms"] > 0 for s in summaries), summaries)
            client.request("shutdown", None)
            client.send({"method": "exit"})
            check(process.wait(timeout=30) == 0, f"exit code {process.returncode}")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            stderr.seek(0)
            log = stderr.read()
            print(log)
            installed.expect_no_checkout_paths(log)


def deb_fields(deb, *names):
    env = os.environ.copy()
    return {name: run(["dpkg-deb", "-f", deb, name], "/", env).stdout.strip() for name in names}


def deb_files(deb):
    listing = run(["dpkg-deb", "-c", deb], "/", os.environ.copy()).stdout
    return {line.split()[-1].lstrip(".") for line in listing.splitlines()
            if not line.startswith("d")}


def package_names(field):
    """'libc6 (>= 2.34), wavecast (= 0.1.0)' -> {'libc6', 'wavecast'}"""
    return {re.split(r"[ (]", d.strip())[0] for d in field.split(",") if d.strip()}


def case_deb(options):
    out = os.path.join(options.build, "tests", "install", "deb")
    shutil.rmtree(out, ignore_errors=True)
    done = run(["cpack", "-G", "DEB", "-B", out], cwd=options.build, env=os.environ.copy(),
               timeout=600)
    expect_success(done, "cpack -G DEB")
    arch = run(["dpkg", "--print-architecture"], "/", os.environ.copy()).stdout.strip()
    debs = sorted(f for f in os.listdir(out) if f.endswith(".deb"))
    main = f"wavecast_{options.version}_{arch}.deb"
    learn = f"wavecast-learn_{options.version}_{arch}.deb"
    check(debs == sorted([main, learn]), f"cpack made {debs}")
    main, learn = os.path.join(out, main), os.path.join(out, learn)
    for deb in (main, learn):
        print(f"{deb}: {os.path.getsize(deb) / 1e6:.1f} MB")

    # The files are split: the helper that links LibTorch alone in wavecast-learn.
    main_files, learn_files = deb_files(main), deb_files(learn)
    for path in INSTALLED_FILES:
        if path not in LEARN_FILES:
            check("/usr/" + path in main_files, f"the wavecast package lacks /usr/{path}")
    check(sorted(learn_files) == sorted("/usr/" + path for path in LEARN_FILES),
          f"wavecast-learn holds {sorted(learn_files)}")
    check(not main_files & learn_files, f"in both packages: {main_files & learn_files}")
    check(not any("__pycache__" in f or "/tests/" in f for f in main_files), main_files)

    fields = deb_fields(main, "Package", "Version", "Architecture", "Depends", "Recommends",
                        "Suggests")
    learn_fields = deb_fields(learn, "Package", "Version", "Depends")
    print("wavecast:", fields)
    print("wavecast-learn:", learn_fields)
    check(fields["Package"] == "wavecast" and learn_fields["Package"] == "wavecast-learn",
          (fields, learn_fields))
    check(fields["Version"] == options.version == learn_fields["Version"], fields)
    check(fields["Architecture"] == arch, fields)
    # Nothing the main package pulls in by default brings LibTorch (1.2 GB of packages).
    depends = package_names(fields["Depends"])
    check(not any("torch" in name for name in depends | package_names(fields["Recommends"])),
          f"the wavecast package pulls in torch: {fields}")
    check({"wavecast-learn", "python3-torch"} <= package_names(fields["Suggests"]), fields)
    learn_depends = package_names(learn_fields["Depends"])
    check(f"wavecast (= {options.version})" in learn_fields["Depends"], learn_fields)
    check(any(name.startswith("libtorch") for name in learn_depends), learn_fields)

    # A machine-readable copyright file (DEP-5) crediting the data wavecast derives from.
    root = tempfile.mkdtemp(prefix="wavecast-deb-")
    try:
        for deb in (main, learn):
            expect_success(run(["dpkg-deb", "-x", deb, root], "/", os.environ.copy()),
                           "dpkg-deb -x")
        for package in ("wavecast", "wavecast-learn"):
            with open(os.path.join(root, "usr/share/doc", package, "copyright")) as f:
                copyright = f.read()
            check_copyright(copyright)
        # Every library the binaries link comes from a package their .deb depends on.
        for binary, packages in (("bin/wavecast", depends),
                                 ("lib/wavecast/wavecast-worker", depends),
                                 ("lib/wavecast/wavecast-learn", learn_depends)):
            for package in linked_packages(os.path.join(root, "usr", binary)):
                check(package in packages, f"{binary} links {package}'s library; its package "
                      f"depends on {sorted(packages)}")
        # The main package's files work where they are unpacked (no root needed).
        env = user_environment(root)
        done = run([os.path.join(root, "usr/bin/wavecast"), "gpus"], root, env)
        expect_success(done, "the unpacked wavecast gpus")
        check("H100-SXM" in done.stdout, done.stdout)
        done = run([os.path.join(root, "usr/bin/wavecast"), "--version"], root, env)
        check(done.stdout == f"wavecast {options.version}\n", done.stdout)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check_copyright(text):
    """The DEP-5 fields that matter: the format, a Files: * paragraph under the project's
    licence, and the derived data's sources with theirs."""
    paragraphs = [dict(re.findall(r"^(\S+?): ?(.*(?:\n .*)*)", p, re.M))
                  for p in text.strip().split("\n\n")]
    header = paragraphs[0]
    check(header.get("Format") ==
          "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", header)
    check(header.get("Upstream-Name") == "wavecast", header)
    files = {p["Files"]: p for p in paragraphs if "Files" in p}
    check(files.get("*", {}).get("License") == "Apache-2.0", files.get("*"))
    check("NeuSight" in files.get("data/weights/*", {}).get("Comment", ""), files)
    check("MIT" in files["data/weights/*"]["License"], files["data/weights/*"])
    check("OpenXLA" in header.get("Comment", "") and "Apache-2.0" in header["Comment"], header)
    gemm = files.get("data/tensor_core_gemm.json", {})
    check(gemm.get("License") == "Apache-2.0" and "OpenXLA" in gemm.get("Comment", ""), gemm)
    licenses = {p["License"].split("\n")[0] for p in paragraphs
                if "License" in p and "Files" not in p}
    check(licenses == {"Apache-2.0", "MIT"}, f"stand-alone licence paragraphs: {licenses}")


def linked_packages(binary):
    """The Debian packages owning the libraries `binary` names (DT_NEEDED); each
    must have one, or the package would not run elsewhere."""
    env = os.environ.copy()
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", run(["readelf", "-d", binary], "/", env).stdout)
    check(needed, f"readelf found no libraries in {binary}")
    found = dict(re.findall(r"^\s*(\S+) => (/\S+)", run(["ldd", binary], "/", env).stdout, re.M))
    packages = set()
    for soname in needed:
        check(soname in found, f"{binary}: ldd cannot find {soname}")
        owner = run(["dpkg", "-S", found[soname]], "/", env)
        if owner.returncode != 0:
            owner = run(["dpkg", "-S", os.path.realpath(found[soname])], "/", env)
        check(owner.returncode == 0, f"{binary} links {found[soname]}, which no Debian "
              "package provides")
        packages.add(owner.stdout.split(":")[0])
    return packages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["install", "predict", "broken", "serve", "deb"])
    for flag in ("--source", "--build", "--prefix", "--version", "--configured-env"):
        parser.add_argument(flag, required=True)
    options = parser.parse_args()
    try:
        globals()["case_" + options.case](options)
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
