"""Which GPU-stack libraries a process mapped, and their versions (pure parsing).

A library's version comes from its file name when the file is versioned
(`libnccl.so.2.21.5`, `libcudart.so.12.4.127`, `libcuda.so.550.54.15`), else from the pip
wheel it came in: `site-packages/nvidia/cudnn/lib/libcudnn.so.9` sits below
`nvidia_cudnn_cu12-9.1.0.70.dist-info`, `site-packages/torch/lib/libtorch_cpu.so` below
`torch-2.4.0+cu121.dist-info`; else only the soname's major number is known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

#: family -> (file-name stem, regex of the wheel's dist-info directory name)
FAMILIES: dict[str, tuple[str, str]] = {
    "nccl": ("libnccl", r"nvidia_nccl_cu\d+"),
    "cuda_runtime": ("libcudart", r"nvidia_cuda_runtime_cu\d+"),
    "cublas": ("libcublas", r"nvidia_cublas_cu\d+"),
    "cudnn": ("libcudnn", r"nvidia_cudnn_cu\d+"),
    "nvrtc": ("libnvrtc", r"nvidia_cuda_nvrtc_cu\d+"),
    "cuda_driver": ("libcuda", r"(?!)"),
    "nvml": ("libnvidia-ml", r"(?!)"),
    "torch": ("libtorch_cpu", r"torch"),
    "torch_cuda": ("libtorch_cuda", r"torch"),
    "openmp": ("libgomp", r"(?!)"),
}
#: `libcudnn.so.9.1.0`, `libgomp-a34b3233.so.1.0.0` (a wheel's vendored copy), `libcuda.so`
_FILE = re.compile(r"^(?P<stem>lib[A-Za-z0-9_+-]*?)(?:-[0-9a-f]{8})?\.so(?:\.(?P<ver>[\d.]+))?$")
#: how far above the library a wheel's dist-info is looked for (site-packages/nvidia/X/lib)
_WHEEL_DEPTH = 3


@dataclass(frozen=True)
class LoadedLib:
    family: str
    path: str
    #: the best version known, and where it came from: file name, wheel NAME, soname
    version: str | None
    source: str


def mapped_files(maps_text: str) -> list[str]:
    """The distinct file paths of a `/proc/PID/maps` (the sixth column), in order."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            seen.setdefault(parts[5].removesuffix(" (deleted)").strip(), None)
    return list(seen)


def family_of(path: str) -> tuple[str, str | None] | None:
    """(family, version in the file name) of a library path; None when not tracked."""
    m = _FILE.match(PurePosixPath(path).name)
    if not m:
        return None
    stem = m.group("stem")
    for family, (want, _) in FAMILIES.items():
        # libcudnn_ops.so.9 is cuDNN too; libcudart_static is not mapped
        if stem == want or (family == "cudnn" and stem.startswith("libcudnn_")):
            return family, m.group("ver")
    return None


def wheel_version(family: str, path: str, list_dir: Callable[[str], Iterable[str]]
                  ) -> str | None:
    """The version in the dist-info of the wheel `path` came in; `list_dir(dir)` names a
    directory's entries (through the process's root), raising OSError when it cannot."""
    pattern = re.compile(rf"^{FAMILIES[family][1]}-(?P<ver>\d[^-/]*?)\.dist-info$")
    for parent in list(PurePosixPath(path).parents)[1:_WHEEL_DEPTH + 1]:
        try:
            names = list(list_dir(str(parent)))
        except OSError:
            continue
        for name in sorted(names):
            if m := pattern.match(name):
                return m.group("ver")
    return None


def loaded_libs(maps_text: str, list_dir: Callable[[str], Iterable[str]]) -> list[LoadedLib]:
    """The tracked libraries one process mapped, with their versions."""
    out = []
    for path in mapped_files(maps_text):
        hit = family_of(path)
        if hit is None:
            continue
        family, ver = hit
        if ver and ver.count(".") >= 2:
            out.append(LoadedLib(family, path, ver, "file name"))
        elif wheel := wheel_version(family, path, list_dir):
            out.append(LoadedLib(family, path, wheel, "wheel"))
        else:
            out.append(LoadedLib(family, path, ver, "soname" if ver else "unknown"))
    return out
