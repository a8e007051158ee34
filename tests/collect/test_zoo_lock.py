"""The offline zoo makes each cached file once: a second process waits for the first.

Parallel test workers, ``--shard`` runs and notebooks on one machine may all need a
built-in model on a clean cache at once; the one that takes the file's lock
assembles (or dequantises) it, the others wait and then use what it made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import pytest

from xlikert.collect import zoo

DATA = b"abcabc"


def _in_other_thread(call):
    """Run ``call`` in a thread (another lock holder, as another process would be)."""
    result: dict = {}

    def run():
        try:
            result["value"] = call()
        except Exception as exc:  # handed back to the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_a_waiting_process_uses_the_assembly_made_meanwhile(tmp_path, monkeypatch, capsys):
    chunk = tmp_path / "chunk.bin"
    chunk.write_bytes(DATA[:3])
    fake = dataclasses.replace(
        zoo.ZOO["qwen2.5-coder-0.5b-instruct"], name="fake", filename="fake.gguf",
        sha256=hashlib.sha256(DATA).hexdigest(),
    )  # fmt: skip
    monkeypatch.setitem(zoo.ZOO, "fake", fake)
    monkeypatch.setattr(zoo, "_chunk_paths", lambda m: [chunk, chunk])
    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "gguf" / "fake.gguf"
    with zoo._making(target):  # another process is assembling it
        thread, result = _in_other_thread(lambda: zoo.resolve_gguf("fake"))
        thread.join(1.0)
        assert thread.is_alive() and not result  # it waits for the lock
        target.write_bytes(DATA)  # what the other process made
    thread.join(30)
    assert result == {"value": target}
    assert "assembling" not in capsys.readouterr().err  # found made: not assembled again
    assert zoo.resolve_gguf("fake") == target and not list(target.parent.glob(".*"))  # no leftover


def test_a_waiting_process_loads_the_folder_dequantised_meanwhile(tmp_path, monkeypatch):
    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path / "cache"))
    missing = tmp_path / "no-such.gguf"  # dequantising it would fail: the test sees if it tried
    sha = "0" * 64
    target = tmp_path / "cache" / "models" / f"m-{sha[:16]}"
    with zoo._making(target):  # another process is dequantising it
        thread, result = _in_other_thread(lambda: zoo._dequantised_folder(missing, sha, "m"))
        thread.join(1.0)
        assert thread.is_alive() and not result
        target.mkdir(parents=True)
        (target / "xlikert-complete.json").write_text("{}")
    thread.join(30)
    assert result == {"value": target}


def test_one_gguf_reader_while_dequantising(tmp_path, monkeypatch):
    """transformers parses the file for its config, tokenizer and tensor names, xlikert for
    the tensors: within ``_parsed_once`` they share one reader of that file."""
    import gguf

    made = []

    class Reader:
        def __init__(self, path, mode="r"):
            made.append((str(path), mode))

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    path, other = tmp_path / "m.gguf", tmp_path / "other.gguf"
    with zoo._parsed_once(path):
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(path) is first  # a str or a Path of the same file
        assert gguf.GGUFReader(str(other)) is not first  # another file: its own reader
        assert gguf.GGUFReader(str(path), "r+") is not first  # another mode: its own
    assert made == [(str(path), "r"), (str(other), "r"), (str(path), "r+")]
    assert gguf.GGUFReader is Reader  # given back after the block
    with zoo._parsed_once(path), pytest.raises(RuntimeError):
        raise RuntimeError("a failed dequantisation")
    assert gguf.GGUFReader is Reader


def test_shards_fill_to_their_size_and_are_named_as_transformers_names_them(tmp_path, monkeypatch):
    """A tensor that would overflow the shard starts a new one; a tensor as large as a
    shard is written alone; the files are renamed ``-of-n`` and indexed."""
    import json

    torch = pytest.importorskip("torch")
    safetensors = pytest.importorskip("safetensors.torch")
    monkeypatch.setattr(zoo, "SHARD_BYTES", 100)
    shards = zoo._Shards(tmp_path)
    sizes = {"a": 10, "b": 10, "c": 10, "d": 50, "e": 3}  # float32: 40, 40, 40, 200, 12 bytes
    tensors = {k: torch.arange(n, dtype=torch.float32) for k, n in sizes.items()}
    for name, t in tensors.items():
        shards.add(name, t)
    assert shards.finish() == set(sizes)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 4 * sum(sizes.values())
    files = [f"model-{i:05d}-of-00004.safetensors" for i in (1, 2, 3, 4)]
    assert index["weight_map"] == dict(zip("abcde", [files[0], files[0], *files[1:]], strict=True))
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == files
    for name, file in index["weight_map"].items():
        assert torch.equal(safetensors.load_file(tmp_path / file)[name], tensors[name])
