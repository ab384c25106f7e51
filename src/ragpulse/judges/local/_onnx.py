"""A local model directory as ``optimum-cli export onnx`` writes it, checked and run.

The directory holds ``model.onnx``, ``tokenizer.json`` and ``config.json`` (whose
``id2label`` names the classes). Everything wrong with it is found when the judge is
made and reported in one line naming the file (``ModelUnavailable``); nothing is ever
downloaded. The inference session is made lazily, once per process: a judge object is
pickled into the judge's child processes without it, and each child makes its own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragpulse.judges.local._device import session_threads

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

__all__ = [
    "FEEDABLE_INPUTS",
    "SLACK",
    "Batch",
    "ModelDirectory",
    "ModelUnavailable",
    "OnnxModel",
    "available_providers",
    "parse_label_map",
]

MODEL_FILE = "model.onnx"
QUANTIZED_FILE = "model_quantized.onnx"
"""What ``optimum-cli onnxruntime quantize`` writes; read when there is no ``model.onnx``."""
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
FEEDABLE_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
"""The graph inputs ragpulse can feed; a graph asking for any other is refused."""
SLACK = 4
"""Tokens kept free in every sequence: a window's text, tokenized whole, can come out a
little longer than its sentences counted one by one."""
DEFAULT_MAX_LENGTH = 512
"""Tokens per sequence when neither the tokenizer's nor the model's config says."""
# A tokenizer_config.json without a real bound says "1e30"; such a value means "unknown".
_UNBOUNDED = 1_000_000


class ModelUnavailable(Exception):
    """The model directory cannot be used; the message names the file and what is wrong."""


def _export_hint(task: str) -> str:
    return (
        f"export one on a machine with internet: `optimum-cli export onnx --model <hub id> "
        f"--task {task} DIR` and pass DIR"
    )


def parse_label_map(text: str | Mapping[int, str] | None) -> dict[int, str]:
    """``"1=supported,0=unsupported"`` (or a mapping) as ``{1: "supported", 0: "unsupported"}``."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {int(k): str(v).strip() for k, v in text.items()}
    mapping: dict[int, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        index, sep, name = item.partition("=")
        if not sep or not index.strip().isdigit() or not name.strip():
            raise ModelUnavailable(
                f"label map {text!r}: {item.strip()!r} is not INDEX=NAME (e.g. 1=supported)"
            )
        mapping[int(index)] = name.strip()
    return mapping


def _read_json(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelUnavailable(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ModelUnavailable(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(loaded, dict):
        raise ModelUnavailable(f"{path}: not a JSON object")
    return loaded


@dataclass(frozen=True)
class ModelDirectory:
    """What the files of a model directory say, checked: labels, length, padding."""

    path: Path
    labels: tuple[str, ...]
    """Class names by output index (``id2label``, with the label map applied)."""
    max_length: int
    """Tokens one sequence (pair) may hold."""
    pad_id: int
    model_file: str = MODEL_FILE
    """The graph's file: ``model.onnx``, else ``model_quantized.onnx``."""
    name: str = ""
    """The model's name: config.json's ``_name_or_path`` (the hub id it was exported
    from), else the directory's name."""
    size: tuple[int, int, int] | None = None
    """Layers, hidden width and feed-forward width, where config.json says them."""

    @classmethod
    def read(
        cls, model: str | Path, *, task: str, label_map: Mapping[int, str] | None = None
    ) -> ModelDirectory:
        """The directory ``model`` checked for ``task``; ``ModelUnavailable`` when unusable."""
        path = Path(model).expanduser()
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a directory"
            raise ModelUnavailable(
                f"{model}: {what}; ragpulse downloads nothing: {_export_hint(task)}"
            )
        graph = MODEL_FILE
        if not (path / MODEL_FILE).is_file() and (path / QUANTIZED_FILE).is_file():
            graph = QUANTIZED_FILE
        for name in (graph, TOKENIZER_FILE, CONFIG_FILE):
            if not (path / name).is_file():
                raise ModelUnavailable(
                    f"{path / name}: missing; the directory must be an ONNX export "
                    f"({_export_hint(task)})"
                )
        config = _read_json(path / CONFIG_FILE)
        labels = _labels(path / CONFIG_FILE, config, label_map or {})
        named = config.get("_name_or_path")
        return cls(
            path,
            labels,
            _max_length(path, config),
            _pad_id(config),
            model_file=graph,
            name=named.strip() if isinstance(named, str) and named.strip() else path.name,
            size=_size(path / CONFIG_FILE, config),
        )

    @property
    def config(self) -> dict[str, Any]:
        """config.json as read now."""
        return _read_json(self.path / CONFIG_FILE)


_SIZE_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size")
MAX_DIMENSION = 1 << 20
"""The most layers, hidden or feed-forward width an encoder's config.json may state: real
ones are hundreds and tens of thousands at most; a larger number is a broken file, and a
cost estimated from it would not be a number."""


def _size(where: Path, config: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(layers, hidden, feed-forward) under the names BERT, RoBERTa, DeBERTa and ModernBERT
    configs use; None when one is missing; ``ModelUnavailable`` when one is beyond
    ``MAX_DIMENSION``."""
    values = [config.get(key) for key in _SIZE_KEYS]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return None
    absurd = [
        key
        for key, value in zip(_SIZE_KEYS, values, strict=True)
        if value > MAX_DIMENSION  # type: ignore[operator]
    ]
    if absurd:
        raise ModelUnavailable(
            f"{where}: {', '.join(absurd)} larger than any encoder's (at most {MAX_DIMENSION})"
        )
    return (int(values[0]), int(values[1]), int(values[2]))  # type: ignore[arg-type]


def _labels(
    where: Path, config: Mapping[str, Any], label_map: Mapping[int, str]
) -> tuple[str, ...]:
    raw = config.get("id2label")
    if not isinstance(raw, Mapping) or not raw:
        if not label_map:
            raise ModelUnavailable(f"{where}: no id2label; pass a label map (e.g. 1=supported)")
        raw = {}
    try:
        by_index = {int(k): str(v) for k, v in raw.items()}
    except ValueError:
        raise ModelUnavailable(f"{where}: id2label keys are not class indexes") from None
    by_index.update(label_map)
    count = max(by_index) + 1
    if sorted(by_index) != list(range(count)):
        raise ModelUnavailable(
            f"{where}: the labels {sorted(by_index)} do not number the classes 0..{count - 1}"
        )
    return tuple(by_index[i] for i in range(count))


def _max_length(path: Path, config: Mapping[str, Any]) -> int:
    """The model's sequence bound: the tokenizer's, else the position table's."""
    candidates: list[int] = []
    tokenizer_config = path / TOKENIZER_CONFIG_FILE
    if tokenizer_config.is_file():
        value = _read_json(tokenizer_config).get("model_max_length")
        if isinstance(value, int | float) and 0 < value < _UNBOUNDED:
            candidates.append(int(value))
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-family tables keep two positions for the padding offset.
        offset = 2 if "roberta" in str(config.get("model_type", "")) else 0
        candidates.append(positions - offset)
    return min(candidates) if candidates else DEFAULT_MAX_LENGTH


def _pad_id(config: Mapping[str, Any]) -> int:
    value = config.get("pad_token_id")
    return value if isinstance(value, int) and value >= 0 else 0


@dataclass(frozen=True)
class Batch:
    """Token ids of a batch of sequences, before padding."""

    ids: Sequence[Sequence[int]]
    type_ids: Sequence[Sequence[int]]


class OnnxModel:
    """The model's tokenizer and inference session, made once per process, on first use.

    Picklable: what crosses to a child process is the directory and the settings; the
    session and tokenizer are rebuilt there. ``check()`` makes both now and checks the
    graph, so a bad directory is reported when the judge is made.
    """

    def __init__(
        self,
        directory: ModelDirectory,
        *,
        threads: int | None = None,
        processes: int = 1,
        providers: Sequence[str] = ("CPUExecutionProvider",),
    ) -> None:
        self.directory = directory
        self.threads = threads
        """Intra-op threads; None: this process's share of the CPU quota."""
        self.processes = processes
        """Judge processes sharing the CPUs (each has its own session)."""
        self.providers = tuple(providers)
        """onnxruntime execution providers, resolved where the judge was made."""
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "threads": self.threads,
            "processes": self.processes,
            "providers": self.providers,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["directory"],
            threads=state["threads"],
            processes=state["processes"],
            providers=state["providers"],
        )

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer, with its own truncation and padding off."""
        self._load()
        assert self._tokenizer is not None
        return self._tokenizer

    def check(self, *, token_level: bool) -> None:
        """Load now; ``ModelUnavailable`` when the graph does not fit ragpulse's use."""
        self._load()
        outputs = self._session.get_outputs()
        shape = outputs[0].shape if outputs else []
        rank = 3 if token_level else 2
        if len(shape) != rank:
            kind = "per-token" if token_level else "per-sequence"
            raise ModelUnavailable(
                f"{self.directory.path / self.directory.model_file}: its output has shape "
                f"{shape}, not the "
                f"{kind} class scores of a {'token' if token_level else 'text'}-classification "
                "export"
            )
        classes = shape[-1]
        if isinstance(classes, int) and classes != len(self.directory.labels):
            raise ModelUnavailable(
                f"{self.directory.path / self.directory.model_file}: it scores {classes} "
                "classes but "
                f"{CONFIG_FILE} names {len(self.directory.labels)}"
            )

    def release(self) -> None:
        """Drop the session and tokenizer (made again on next use)."""
        with self._lock:
            self._session, self._tokenizer, self._inputs = None, None, ()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ModelUnavailable(
                    f"the local model judges need the local extra ({exc}); "
                    "`pip install 'ragpulse[local]'`"
                ) from None
            path = self.directory.path
            try:
                tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
            except Exception as exc:
                raise ModelUnavailable(
                    f"{path / TOKENIZER_FILE}: not a tokenizer ({exc})"
                ) from None
            tokenizer.no_truncation()
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = session_threads(self.threads, self.processes)
            options.inter_op_num_threads = 1
            graph = path / self.directory.model_file
            try:
                session = onnxruntime.InferenceSession(
                    str(graph), options, providers=list(self.providers)
                )
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ModelUnavailable(f"{graph}: not a usable ONNX model ({first})") from None
            inputs = tuple(i.name for i in session.get_inputs())
            unknown = [name for name in inputs if name not in FEEDABLE_INPUTS]
            if unknown or "input_ids" not in inputs:
                problem = f"asks for inputs {unknown}" if unknown else "has no input_ids input"
                raise ModelUnavailable(
                    f"{graph}: the graph {problem}; ragpulse feeds "
                    f"{', '.join(FEEDABLE_INPUTS)} only"
                )
            self._tokenizer, self._inputs, self._session = tokenizer, inputs, session

    def special_tokens(self, pair: bool) -> int:
        """Tokens the tokenizer adds around one sequence or a pair."""
        processor = self.tokenizer.post_processor
        return 0 if processor is None else int(processor.num_special_tokens_to_add(pair))

    def run(self, batch: Batch) -> np.ndarray:
        """Class probabilities: ``(batch, classes)`` or ``(batch, tokens, classes)``."""
        import numpy as np

        self._load()
        longest = max(len(ids) for ids in batch.ids)
        size = len(batch.ids)
        ids = np.full((size, longest), self.directory.pad_id, dtype=np.int64)
        mask = np.zeros((size, longest), dtype=np.int64)
        types = np.zeros((size, longest), dtype=np.int64)
        for row, (row_ids, row_types) in enumerate(zip(batch.ids, batch.type_ids, strict=True)):
            ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
            types[row, : len(row_types)] = row_types
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: available[name] for name in self._inputs}
        logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float64)
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities: np.ndarray = shifted / shifted.sum(axis=-1, keepdims=True)
        return probabilities


def available_providers() -> tuple[str, ...]:
    """The execution providers the installed onnxruntime offers."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise ModelUnavailable(
            f"the local model judges need the local extra ({exc}); `pip install 'ragpulse[local]'`"
        ) from None
    return tuple(onnxruntime.get_available_providers())
