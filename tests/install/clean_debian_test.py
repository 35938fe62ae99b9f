#!/usr/bin/env python3
"""What `sudo apt install ./wavecast_*.deb` brings to a clean Debian 12, simulated.

  clean_debian_test.py DEB_DIR

apt-get -s resolves the install against a dpkg status of a minimal Debian 12 (the
Priority: required packages and apt, what a debian:12 container holds), made from
this machine's apt lists: nothing is downloaded or installed, and it takes about a
minute. Checks that the wavecast package brings only what the libraries its binaries
link bring (the embedded Python first), never torch, and prints the counts; the
figures are recorded in README.md. Exits 77 (skipped) without Debian 12's apt lists.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

SKIPPED = 77


def apt(status, *args, recommends=True):
    """apt-get -s with `status` as the installed packages; the Inst lines' package names."""
    command = ["apt-get", "-s", "-o", f"Dir::State::status={status}",
               "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
               "-o", f"APT::Install-Recommends={'true' if recommends else 'false'}",
               "install", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(command)}:\n{done.stderr}")
    return [re.match(r"Inst (\S+) \(([^ ]+) .*\[(\S+)\]", line).groups()
            for line in done.stdout.splitlines() if line.startswith("Inst ")]


def minimal_debian(folder):
    """A dpkg status file listing a minimal Debian 12's packages; its path."""
    available = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True,
                               check=True).stdout.split("\n\n")
    stanzas = [dict(re.findall(r"^(\S+): (.*)$", s, re.M)) | {"": s} for s in available]
    required = sorted({s["Package"] for s in stanzas
                       if s.get("Priority") == "required" or s.get("Essential") == "yes"})
    empty = os.path.join(folder, "empty-status")
    open(empty, "w").close()
    base = {(name.split(":")[0], version, arch)
            for name, version, arch in apt(empty, *required, "apt", recommends=False)}
    installed = []
    for stanza in stanzas:
        if (stanza.get("Package"), stanza.get("Version"), stanza.get("Architecture")) in base:
            lines = [line for line in stanza[""].splitlines()
                     if not re.match(r"(Filename|Size|MD5sum|SHA256|Description-md5):", line)]
            installed.append("\n".join(lines[:1] + ["Status: install ok installed"] + lines[1:]))
    status = os.path.join(folder, "status")
    with open(status, "w") as f:
        f.write("\n\n".join(installed) + "\n")
    print(f"minimal Debian 12: {len(installed)} packages ({len(required)} required and apt, "
          "with their dependencies)")
    return status


def names(installs):
    return sorted(name.split(":")[0] for name, _, _ in installs)


def main():
    deb_dir = sys.argv[1]
    release = open("/etc/os-release").read()
    if "VERSION_CODENAME=bookworm" not in release:
        print("skipped: this is not Debian 12, whose apt lists the simulation needs")
        return SKIPPED
    if not glob.glob("/var/lib/apt/lists/*_Packages*"):
        print("skipped: no apt lists in /var/lib/apt/lists (run apt-get update)")
        return SKIPPED
    debs = {name: glob.glob(os.path.join(deb_dir, f"{name}_*.deb"))
            for name in ("wavecast", "wavecast-learn")}
    if not all(len(found) == 1 for found in debs.values()):
        raise SystemExit(f"FAIL: expected one wavecast and one wavecast-learn .deb in {deb_dir}")
    # apt takes a path (with a slash) for a .deb file, a name otherwise.
    main_deb, learn_deb = (os.path.abspath(debs[name][0]) for name in ("wavecast", "wavecast-learn"))
    libraries = subprocess.run(["dpkg-deb", "-f", main_deb, "Depends"], capture_output=True,
                               text=True, check=True).stdout
    libraries = [re.split(r"[ (]", d.strip())[0] for d in libraries.split(",")]
    print(f"wavecast depends on {', '.join(libraries)}")

    with tempfile.TemporaryDirectory(prefix="wavecast-clean-debian-") as folder:
        status = minimal_debian(folder)
        brought = [n for n in names(apt(status, main_deb)) if n != "wavecast"]
        lean = [n for n in names(apt(status, main_deb, recommends=False)) if n != "wavecast"]
        floor = names(apt(status, *libraries))
        learn = [n for n in names(apt(status, main_deb, learn_deb))
                 if n not in ("wavecast", "wavecast-learn")]
    print(f"apt install ./{os.path.basename(main_deb)}: {len(brought)} new packages besides "
          f"wavecast ({len(lean)} with --no-install-recommends)")
    if len(brought) <= 40:
        print(" ".join(brought))
    print(f"the libraries it links alone bring {len(floor)}")
    print(f"with ./{os.path.basename(learn_deb)} too: {len(learn)} new packages")
    failures = []
    torch = [name for name in brought if "torch" in name]
    if torch:
        failures.append(f"the wavecast package brings torch: {' '.join(torch)}")
    beyond = sorted(set(brought) - set(floor))
    if beyond:
        failures.append(f"beyond its libraries' packages it brings {len(beyond)} more: "
                        f"{' '.join(beyond[:20])}{' ...' if len(beyond) > 20 else ''}")
    if not any(name.startswith("libtorch") for name in learn):
        failures.append(f"wavecast-learn does not bring LibTorch: {' '.join(learn)}")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
