"""One in-process vLLM engine for a whole test session: jobs in, answers out.

vLLM is not installed in the test environment, so the in-process backend runs in the
vLLM venv's Python. ``tests/integration/conftest.py`` starts this file there once per
session (:class:`VLLMJobs`); the child loads the offline SmolLM2 into one engine and
runs every job on it, so the tests pay for one engine start, not one each. A job is a
JSON line on the child's stdin, ``{"job": name, "args": [...]}``; the child runs
``JOBS[name](*args)`` (they write result files the tests read) and answers with one
JSON line, ``{"ok": true}`` or ``{"ok": false, "error": <traceback>}``. vLLM's own
output goes to the log file.

The child is also imported by the processes vLLM spawns (its engine core re-imports
the main script), so everything runs under the main guard.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

#: The one engine's model entry: every job reads through an engine started from it.
SPEC = {"name": "m", "source": "smollm2-135m-instruct", "backend": "vllm",
        "enforce_eager": True, "max_model_len": 2048, "gpu_memory_utilization": 0.25}  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """A job's outcome: ``ok``, else the child's traceback and the log's tail."""

    ok: bool
    error: str = ""


class VLLMJobs:
    """The parent's end: starts the child in the vLLM venv and its engine, sends jobs, waits
    for their answers.

    Raises
    ------
    RuntimeError
        The engine did not start (the log's tail says why).
    """

    def __init__(self, log: Path):
        from xlikert.testing.engines import VLLM_ENV, engine_python

        self.log = log
        with open(log, "ab") as fh:
            self.proc = subprocess.Popen(
                [str(engine_python("vllm")), __file__], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=fh, env={**os.environ, **VLLM_ENV},
                text=True, start_new_session=True,
            )  # fmt: skip
        started = self.run("start")
        if not started.ok:
            self.close()
            raise RuntimeError(f"the in-process vLLM engine did not start: {started.error}")

    def run(self, job: str, *args: object, timeout: float = 1200) -> Answer:
        """Run ``job`` on the live engine (started by the first job) and wait for it."""
        try:
            self.proc.stdin.write(json.dumps({"job": job, "args": [str(a) for a in args]}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # the child has exited, or was closed
            return Answer(False, f"the vLLM child has exited\n{self._tail()}")
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            why = "exited" if self.proc.poll() is not None else f"no answer in {timeout} s"
            self.close()
            return Answer(False, f"job {job!r}: the vLLM child {why}\n{self._tail()}")
        answer = json.loads(line)
        return Answer(True) if answer["ok"] else Answer(False, answer["error"] + self._tail())

    def _tail(self, n: int = 3000) -> str:
        text = self.log.read_text(errors="replace")
        return f"--- {self.log} (tail) ---\n{text[-n:]}"

    def close(self) -> None:
        """Close the child's stdin (it shuts its engine down and exits); kill it if stuck."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=60)


# ----------------------------------------------------------------------------- the child
_live: list = []  # the one engine (vllm.LLM), started by the first job


def loader(spec, options, probe=None):
    """``collect``'s loader: a model on the live engine, which ``collect`` does not close."""
    import xlikert.collect.backends.vllm as backend

    class Kept(backend.VLLMModel):
        def close(self):
            pass

    model = Kept(spec, options, engine=_live[0] if _live else None)
    _live[:1] = [model.llm]
    return model


def start():
    """Start the engine (the session fixture does, so its cost is the fixture's)."""
    from xlikert.collect.options import CollectOptions

    loader(SPEC, CollectOptions(scale=tuple(range(1, 8))))


def demo(out, multi, persona, persona_toml):
    """The demo design with a decoding grid, a 0-10 scale (multi-token answers: "10" is two
    tokens and "1" a prefix of it) and a 1..5 instrument with a free factor (Mini-IPIP x
    personas), each on the same live engine."""
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    runner = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    # the test module's prompts: 2 targets x 8 items (2 of them do not name the target)
    prompts = load_experiment("demo").build_prompts().isel(target=[0, 1], item=[*range(6), 9, 11])
    collect(prompts, [SPEC], out, progress=False, temperatures=(0.5, 1.0), top_ps=(0.9, 1.0),
            loader=loader)  # fmt: skip
    collect(prompts.isel(item=slice(0, 1)), [SPEC], multi, progress=False, scale=range(0, 11),
            temperatures=(1.0,), top_ps=(0.9, 1.0), loader=loader)  # fmt: skip
    people = load_experiment(persona_toml).build_prompts().isel(item=slice(0, 2))
    collect(people, [SPEC], persona, progress=False, temperatures=(0.7, 1.0), top_ps=(0.9, 1.0),
            loader=loader)  # fmt: skip
    assert os.environ.get("VLLM_USE_V2_MODEL_RUNNER") == runner, "the runner switch stayed set"


def reasoning(a, b, ids_file):
    """The demo's first target and first two items with three reasoning traces, run twice;
    the traces' token ids as the backend stores them (of the first run) go to ``ids_file``."""
    import xlikert.collect.backends.inprocess as base
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts().isel(target=[0], item=[0, 1])
    spec = {**SPEC, "reasoning": {"traces": 3, "max_new_tokens": 24, "seed": 2}}
    ids = []
    store = base.store_traces  # the in-process backends' common outline stores them

    def record(res, row, read, traces, *rest):
        ids.append(traces)
        return store(res, row, read, traces, *rest)

    base.store_traces = record
    try:
        for out in (a, b):
            collect(prompts, [spec], out, progress=False, loader=loader)
    finally:
        base.store_traces = store
    Path(ids_file).write_text(json.dumps(ids[: len(ids) // 2]))


def formats(out):
    """The built-in ``formats`` experiment (original, reversed, letters), three items."""
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    prompts = load_experiment("formats").build_prompts().sel(target=["USA"], item=["1", "2", "3"])
    collect(prompts, [SPEC], out, progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0),
            loader=loader)  # fmt: skip


def sequential(out):
    """The demo's CETSCALE items 1-2 (target USA) asked in one conversation, every history
    read through the live engine's prefix cache (sequential administration)."""
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts().sel(target=["USA"]).isel(item=[0, 1])
    prompts = prompts.expand_dims(administration=["sequential"])
    collect(prompts, [SPEC], out, progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0),
            loader=loader)  # fmt: skip


def survey(prompts_file, out):
    """A questionnaire's prompts (:mod:`support.survey`, saved by the test): each item read
    with its own options, one token or several."""
    import xarray as xr

    from xlikert.collect import collect

    prompts = xr.open_dataset(prompts_file).load()
    collect(prompts, [SPEC], out, progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0),
            loader=loader)  # fmt: skip


#: The elicitation job's settings: every level, short replies, a pruned reply tree.
ELICITATION = {"answer_prefix": "My answer is", "reply_tokens": 8, "own_words_tol": 0.05,
               "own_words_max_passes": 8, "temperatures": (1.0,), "top_ps": (1.0,),
               "stated_tokens": 24}  # fmt: skip
#: The second model of the elicitation job (its own engine, closed after the job).
QWEN = {**SPEC, "source": "qwen2.5-coder-0.5b-instruct"}


def elicitation_prompts():
    """CETSCALE item 17 of the demo, target USA (SmolLM2's greedy reply writes its answer
    after a preamble: "The answer is 1-7."), with every elicitation level."""
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts().sel(target=["USA"], item=["17"])
    return prompts.expand_dims(
        elicitation=["first_token", "prefix", "greedy", "own_words", "stated"]
    )


def elicitation(smol):
    """Every elicitation level of :func:`elicitation_prompts`: SmolLM2 on the live engine."""
    from xlikert.collect import collect

    collect(elicitation_prompts(), [SPEC], smol, progress=False, loader=loader, **ELICITATION)


def elicitation_qwen(qwen):
    """The same on Qwen2.5-Coder-0.5B, on an engine of its own (started and shut down here:
    a costly test's job)."""
    from xlikert.collect import collect

    collect(elicitation_prompts(), [QWEN], qwen, progress=False, **ELICITATION)


def numerals(experiment, out, shown):
    """An experiment file's first item (the test writes one that shows the scale in other
    scripts' digits), read on the live engine under the numeral rule (``out``) and under
    the rule restricted to the scripts shown (``shown``: ``numerals="shown"``)."""
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    prompts = load_experiment(experiment).build_prompts().isel(item=[0])
    for path, rule in ((out, "any"), (shown, "shown")):
        collect(prompts, [SPEC], path, progress=False, temperatures=(1.0,), top_ps=(0.9, 1.0),
                loader=loader, numerals=rule)  # fmt: skip


#: The labels' walk job's prompt and labels (four labels, "Strongly ..." in thousands of
#: spellings: only the walk reads them).
WALK = {"labels": ("Strongly agree", "Agree", "Disagree", "Strongly disagree"),
        "system": "Answer with ONLY one of: Strongly agree, Agree, Disagree, Strongly disagree.",
        "users": ("Tea is better than coffee.", "Cats make better pets than dogs."),
        "answer_tol": 1e-3,
        "temperatures": (1.0,), "top_ps": (0.9, 1.0)}  # fmt: skip


def walk_options():
    """The run options of the labels' walk job (shared with the test's transformers read)."""
    from xlikert.collect.options import CollectOptions

    labels = WALK["labels"]
    return CollectOptions(scale=tuple(range(1, len(labels) + 1)), answer_labels=labels,
                          answer_tol=WALK["answer_tol"], temperatures=WALK["temperatures"],
                          top_ps=WALK["top_ps"])  # fmt: skip


def walk(out):
    """Two prompts' word answers (:data:`WALK`) by the certified walk on the live engine
    (read together, a round of both in one ``generate`` call); the readout, the prompts'
    ids and the number of requests to ``out`` (JSON)."""
    m = loader(SPEC, walk_options())
    texts = [m.template.render(WALK["system"], u) for u in WALK["users"]]
    ids = [m.template.encode(t) for t in texts]
    got = m.read_prompts(texts, ids)
    keep = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in got.items()
            if k not in ("topk_id", "topk_logprob")}  # fmt: skip
    keep["ids"], keep["walk_passes"] = [[int(i) for i in x] for x in ids], m.walk_passes
    keep["rule"] = m.provenance()["answers"]
    Path(out).write_text(json.dumps(keep))


#: The sequential walk job's battery: two items asked in one conversation, answered with
#: :data:`WALK`'s labels (every history's answers read by the walk).
WALK_BATTERY = {"system": WALK["system"], "questions": WALK["users"], "replies": WALK["labels"]}


def walk_battery():
    """:data:`WALK_BATTERY` as a :class:`~xlikert.collect.context.Battery`."""
    from xlikert.collect.context import Battery

    b = WALK_BATTERY
    return Battery(b["system"], tuple(b["questions"]), tuple(b["replies"]))


def sequential_walk(out):
    """:data:`WALK_BATTERY` administered sequentially on the live engine (every history's
    answers by the labels' walk); then the same labels in reasoning mode, which the walk
    does not serve on vLLM yet (its refusal's message kept). The tree, its marginals, the
    walk's passes and the message to ``out`` (JSON)."""
    import numpy as np

    from xlikert.collect.context import administer
    from xlikert.core.errors import CollectionError

    m = loader(SPEC, walk_options())
    assert m.walks_listing(), "the spellings are too many to list: only the walk reads them"
    res = administer(m, walk_battery())
    tree, marg = res.tree, res.marginals()
    keep = {"paths": [[int(a) for a in p] for p in tree.paths], "passes": res.passes,
            "walk_passes": m.walk_passes, "tol_met": res.tol_met}  # fmt: skip
    for k in ("pmf", "valid_mass", "answer_error"):
        keep[f"tree_{k}"] = np.asarray(getattr(tree, k)).tolist()
    keep.update({k: np.asarray(v).tolist() for k, v in marg.items()})
    spec = {**SPEC, "reasoning": {"traces": 1, "max_new_tokens": 4, "seed": 2}}
    try:
        loader(spec, walk_options()).score([(WALK["system"], WALK["users"][0])])
        keep["reasoning_error"] = None
    except CollectionError as exc:
        keep["reasoning_error"] = str(exc)
    Path(out).write_text(json.dumps(keep))


#: The elicitation levels read over :data:`WALK`'s labels (the labels' walk after the
#: prefix, after the greedy reply's preamble, and below each reply prefix that starts one).
WALK_LEVELS = ("prefix", "greedy", "own_words")


def walk_elicitation_options():
    """The run options of the walked levels' job: :func:`walk_options` with a prefix,
    short replies and a pruned reply tree."""
    return walk_options().replace(answer_prefix="My answer is", reply_tokens=6,
                                  own_words_tol=0.05, own_words_max_passes=6)  # fmt: skip


def walk_levels(model):
    """:data:`WALK_LEVELS` of :data:`WALK`'s first prompt on ``model`` (opened with
    :func:`walk_elicitation_options`): each level's record, numbers as lists, texts as str
    (the job's and the test's transformers read alike)."""
    import numpy as np

    from xlikert.collect.elicitation import score_elicited

    keep, opts = {}, walk_elicitation_options()
    for level in WALK_LEVELS:
        res = score_elicited(model, [(WALK["system"], WALK["users"][0])], level, opts)
        keep[level] = {k: (np.asarray(v).tolist() if np.asarray(v).dtype.kind in "fiub"
                           else [str(x) for x in np.asarray(v).ravel()])
                       for k, v in res.data.items()}  # fmt: skip
    return keep


def elicitation_walk(out):
    """:func:`walk_levels` on the live engine, to ``out`` (JSON)."""
    Path(out).write_text(json.dumps(walk_levels(loader(SPEC, walk_elicitation_options()))))


JOBS = {"start": start, "demo": demo, "reasoning": reasoning, "formats": formats,
        "sequential": sequential, "survey": survey, "elicitation": elicitation,
        "elicitation_qwen": elicitation_qwen, "numerals": numerals, "walk": walk,
        "sequential_walk": sequential_walk, "elicitation_walk": elicitation_walk}  # fmt: skip


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)  # the answers' own channel
    os.dup2(2, 1)  # everything else printed (vLLM, its workers) goes to the log
    try:
        for line in sys.stdin:
            job = json.loads(line)
            try:
                JOBS[job["job"]](*job["args"])
                answer = {"ok": True}
            except Exception:
                answer = {"ok": False, "error": traceback.format_exc()}
            answers.write(json.dumps(answer) + "\n")
    finally:
        if _live:
            _live[0].llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
