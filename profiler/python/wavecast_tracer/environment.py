"""The Python environment the worker imports from, for errors that say how to fix it.

The worker embeds the system interpreter, so `sys.prefix` is never the
user's venv: wavecast-worker passes the venv's folder to `configure`.
"""

import glob
import importlib.metadata
import importlib.util
import os
import re
import sys

_root = None  # the venv (or prefix) folder; None: the embedded interpreter's own packages

# Import names whose package on PyPI is called otherwise.
_PACKAGE_OF_MODULE = {
    "cv2": "opencv-python",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "google.protobuf": "protobuf",
    "Crypto": "pycryptodome",
    "attr": "attrs",
    "dateutil": "python-dateutil",
}


def configure(root):
    global _root
    _root = os.fspath(root) if root else None


def python_version():
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def describe():
    """Names the environment: 'the Python environment /home/me/venv', or the system Python."""
    if _root:
        return f"the Python environment {_root}"
    return f"the system Python ({sys.executable})"


def install_hint(package, reason="Install it there"):
    """What to run so that `pip install package` reaches the packages the worker imports."""
    if _root:
        pip = os.path.join(_root, "bin", "pip")
        return f"{reason} ({pip} install {package}), or select a Python environment that has it."
    python = f"python{python_version()}"
    return (f"Make a venv with it and select it ({python} -m venv VENV && "
            f"VENV/bin/pip install {package}; the editor's Python interpreter, wavecast.pythonEnv "
            f"or --python-env VENV).")


def package_for_module(module):
    """The PyPI package that provides the top-level module `module` (usually the same name)."""
    top = (module or "").split(".")[0]
    return _PACKAGE_OF_MODULE.get(module) or _PACKAGE_OF_MODULE.get(top) or top


def missing_module(exc, project_root=None):
    """(message, hint) when `exc` says a module is not installed; None for other import errors.
    A package of the project itself (`project_root`/name/__init__.py) is not one to install
    from PyPI: it is found from the project's top."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name:
        return None
    package = package_for_module(name)
    top = name.split(".")[0]
    if project_root and os.path.isfile(os.path.join(project_root, top, "__init__.py")):
        return (f"No module named '{name}': the project's own package at {os.path.join(project_root, top)}, "
                f"which `python FILE` does not find from the script's folder",
                install_hint(f"-e {project_root}", "Install the project there") +
                f" Or start wavecast with PYTHONPATH={project_root}, as `python -m` from there finds it.")
    # A submodule that the installed version of its package lacks.
    if top != name and name not in _PACKAGE_OF_MODULE and _installed(top):
        return (f"No module named '{name}' in {describe()}, whose {package} has no such module",
                install_hint(f"--upgrade {package}", "Upgrade it there"))
    return (f"No module named '{name}' in {describe()}", install_hint(package))


_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)' from '([^']+)'")


def missing_name(exc):
    """(message, hint) when `exc` is an import of a name the installed package lacks
    (`from transformers.utils import send_example_telemetry`, removed in transformers 5):
    the package is there, in another version than the script was written for; None for
    other import errors."""
    found = _CANNOT_IMPORT.search(str(exc)) if isinstance(exc, ImportError) else None
    if found is None or isinstance(exc, ModuleNotFoundError):
        return None
    name, module = found.groups()
    package = package_for_module(module)
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = None
    installed = f"{package} {version}" if version else package
    return (f"cannot import name '{name}' from '{module}': {installed} in {describe()} has no such name",
            f"The script was written for another version of {package}: install the one it names "
            f"(its requirements), or change the import. " + install_hint(f"'{package}==VERSION'", "Install it there"))


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def torch_import_failure(exc, torch_dir):
    """(message, hint) for a failed `import torch` from `torch_dir`, naming the likely cause."""
    text = str(exc)
    where = _root or sys.executable
    reinstall = install_hint("--force-reinstall torch",
                             f"Reinstall it for Python {python_version()}")
    built_for = _extension_python_versions(torch_dir) if torch_dir else set()
    if built_for and python_version() not in built_for:
        versions = ", ".join(sorted(built_for))
        return (f"torch in {torch_dir} was built for Python {versions}, but wavecast's worker runs "
                f"Python {python_version()} ({where})", reinstall)
    if "undefined symbol" in text or "wrong ELF class" in text or "invalid ELF header" in text:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return (f"torch in {torch_dir or where} does not load with Python {python_version()}: "
                f"{first}", reinstall)
    return None


def _extension_python_versions(torch_dir):
    """Python versions torch's compiled core was built for ({"3.12"}), from _C's file names."""
    versions = set()
    for path in glob.glob(os.path.join(torch_dir, "_C.*.so")):
        match = re.match(r"_C\.cpython-(\d)(\d+)", os.path.basename(path))
        if match:
            versions.add(f"{match.group(1)}.{match.group(2)}")
        elif os.path.basename(path) == "_C.abi3.so":
            versions.add(python_version())  # any CPython 3
    return versions
