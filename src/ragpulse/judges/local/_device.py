"""Where a local model runs: onnxruntime execution providers, and threads from the CPU quota.

``judge_device`` (``--device``, ``RAGPULSE_JUDGE_DEVICE``) is ``cpu``, ``cuda``, or a
comma-separated list of onnxruntime providers in order of preference
(``TensorrtExecutionProvider,CUDAExecutionProvider``; short names such as ``cuda``,
``tensorrt``, ``rocm``, ``openvino``, ``coreml``, ``dml`` are accepted). CUDA needs the
``onnxruntime-gpu`` package in place of ``onnxruntime``.

A provider the installed onnxruntime does not offer is dropped with one note (the judge
keeps judging, on what is left and always the CPU last): a missing GPU runtime must
not stop a running service. The providers are resolved once, where the judge is made,
and handed to its processes as they are, so the note is given once, not per process.

Threads: with no ``judge_threads`` set, each judge process's session takes its share of
the CPUs this process may use (``available_cpus``: affinity and the cgroup's quota) over
the judge processes, at least one; more threads than that only take turns.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.judges._cpus import available_cpus

__all__ = ["CPU", "DEVICES", "requested_providers", "session_threads", "usable_providers"]

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
DEVICES: dict[str, tuple[str, ...]] = {"cpu": (CPU,), "cuda": (CUDA, CPU)}
"""The device names, as onnxruntime provider lists."""
_SHORT = {
    "cpu": CPU,
    "cuda": CUDA,
    "tensorrt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
}


def requested_providers(device: str | Sequence[str]) -> tuple[str, ...]:
    """The provider names ``device`` asks for, in order; ``ValueError`` when it names none."""
    if isinstance(device, str):
        key = device.strip().lower()
        if key in DEVICES:
            return DEVICES[key]
        names = [part.strip() for part in device.split(",") if part.strip()]
    else:
        names = [str(part).strip() for part in device if str(part).strip()]
    if not names:
        raise ValueError(f"device {device!r} names no onnxruntime provider")
    return tuple(_SHORT.get(name.lower(), name) for name in names)


def usable_providers(
    requested: Sequence[str], available: Sequence[str]
) -> tuple[tuple[str, ...], str | None]:
    """The requested providers this onnxruntime offers (the CPU always last), and a note
    naming the ones it does not (None when all are there)."""
    kept = [p for p in requested if p in available and p != CPU]
    missing = [p for p in requested if p not in available]
    providers = (*kept, CPU)
    if not missing:
        return providers, None
    hint = " (CUDA needs the onnxruntime-gpu package)" if CUDA in missing else ""
    note = (
        f"onnxruntime here has no {', '.join(missing)}{hint}; it offers "
        f"{', '.join(available) or 'none'}. The judge runs on {', '.join(providers)}"
    )
    return providers, note


def session_threads(threads: int | None, processes: int) -> int:
    """``threads``, or this process's share of the CPUs it may use over ``processes``."""
    if threads is not None:
        return threads
    return max(1, available_cpus() // max(1, processes))
