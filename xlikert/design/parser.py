"""Reading experiment files: TOML (or an already parsed table) -> :class:`Experiment`.

:func:`load_experiment` reads a file or a built-in experiment by name and
:func:`experiment_from_dict` a parsed table; both validate every field against
the file schema (:mod:`xlikert.design.file_schema`), collect every problem
(:mod:`xlikert.design.problems`) and check each template against the fields its
factor levels supply, so :meth:`Experiment.build_prompts` cannot fail half-way.
The factors are parsed in :mod:`xlikert.design.parse_factors`, the templates
checked in :mod:`xlikert.design.parse_checks`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .elicitation import stated_instruction_problem
from .experiment import Experiment, Factor
from .file_schema import ExperimentFile, ExperimentHead, ModelSpec
from .instrument import Instrument, builtin_instruments, load_instrument, resolve_file
from .items import Item, scale_from_spec
from .parse_checks import (
    Suppliers,
    build_system_templates,
    build_user_templates,
    check_factors_change_prompts,
    check_format_shown,
    check_item_scales_shown,
)
from .parse_factors import parse_factors, parse_item_scales
from .problems import Problems, read_toml, suggest, validate
from .scale import Option, Scale
from .translation import experiment_translation_problems, translated_experiment

__all__ = ["builtin_experiments", "experiment_from_dict", "load_experiment"]


def _experiment_dir():
    return resources.files("xlikert.design").joinpath("experiments")


def builtin_experiments() -> list[str]:
    """Names of the experiments shipped with xlikert (``"demo"``, ``"paper"``, ``"framing"``, ...).

    Returns
    -------
    list of str
        The names, sorted; each loads with :func:`load_experiment`.

    Examples
    --------
    >>> builtin_experiments()
    ['anes96', 'anes96_survey', 'demo', 'formats', 'framing', 'languages', 'paper', 'wvs_immig']
    """
    return sorted(
        p.name.removesuffix(".toml")
        for p in _experiment_dir().iterdir()
        if p.name.endswith(".toml")
    )


def load_experiment(path_or_builtin: str | Path) -> Experiment:
    """Load and validate an experiment file, or a built-in experiment by name.

    Parameters
    ----------
    path_or_builtin : str or pathlib.Path
        Path of a TOML experiment file, or a built-in name (``"demo"``: the
        offline demo, 3 zoo models x 4 targets on CETSCALE; ``"paper"``: the
        paper's 5 x 4 design; ``"framing"``: 3 models x 4 targets x 6 framings;
        ``"formats"``: 3 response formats x 4 targets on SmolLM2-135M;
        ``"anes96"``: the ANES 1996 example; see :func:`builtin_experiments`).
        A string is read as a path when it names an existing file, ends in
        ``.toml`` or holds a path separator.

    Returns
    -------
    Experiment
        The validated experiment: its factors, items, models and templates;
        :meth:`Experiment.build_prompts` renders its prompts.

    Raises
    ------
    ConfigError
        Listing every problem, each naming the file, the item or table and the field.

    Examples
    --------
    >>> exp = load_experiment("framing")
    >>> exp.factors["prompt"][:2], exp.n_prompts
    (['v0_original', 'v1_participant'], 408)
    """
    path = resolve_file(path_or_builtin, "experiment", _experiment_dir(), builtin_experiments())
    table, digest = read_toml(path)
    return experiment_from_dict(table, file=str(path), sha256=digest, base_dir=path.parent)


def experiment_from_dict(
    table: dict[str, Any],
    *,
    file: str = "<dict>",
    sha256: str | None = None,
    base_dir: str | Path | None = None,
    _instrument: Instrument | None = None,
    _options_named_like: tuple[Option, ...] | None = None,
) -> Experiment:
    """Build an :class:`Experiment` from an already parsed table (same schema as the file).

    Parameters
    ----------
    table : dict
        The experiment as a TOML file would parse: ``[experiment]``, ``[factors.*]``,
        ``[[models]]``, optional ``[scale]``, ``[constants]`` and ``[collect]``
        (see :doc:`/design-files`).
    file : str, default "<dict>"
        The name the error messages give the table; its stem is the experiment's
        name when ``[experiment]`` has none.
    sha256 : str, optional
        The experiment's hash, recorded in the results; default: the SHA-256 of the
        table's canonical JSON.
    base_dir : str or pathlib.Path, optional
        The folder a relative instrument path is resolved against (default: the
        working directory).
    _instrument : Instrument, optional
        Internal: the instrument to use instead of ``[experiment] instrument`` (one
        language of an experiment with a ``language`` factor).
    _options_named_like : tuple of Option, optional
        Internal: the options whose names the ``[scale]``'s options take (the
        experiment's own, where its ``[scale]`` is translated).

    Returns
    -------
    Experiment
        The validated experiment.

    Raises
    ------
    ConfigError
        Listing every problem, each naming the file, the item or table and the field.

    Examples
    --------
    >>> exp = experiment_from_dict({
    ...     "experiment": {"name": "mini", "instrument": "cetscale", "items": ["1", "2"]},
    ...     "factors": {"target": {"levels": ["USA", "France"]}},
    ...     "models": [{"name": "SmolLM2-135M-Instruct", "source": "smollm2-135m-instruct"}],
    ... })
    >>> exp.factors, exp.n_prompts
    ({'target': ['USA', 'France']}, 4)
    >>> experiment_from_dict({"experiment": {"instrument": "cetscal"}})
    Traceback (most recent call last):
    ...
    xlikert.core.errors.ConfigError: <dict>: [experiment], field 'instrument': ...'cetscale'?); ...
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: an experiment must be a table, got {type(table).__name__}")
    p = Problems(file)
    spec = validate(ExperimentFile, table, p)
    head = spec.experiment
    inst = _instrument_of(p, head.instrument, base_dir) if _instrument is None else _instrument
    default = _default_scale(inst, spec.scale, _options_named_like)
    items = _select_items(p, inst, head.items)
    scales = parse_item_scales(p, items, default, overridden=spec.scale is not None)
    factors, failed = parse_factors(p, inst, spec.factors, scales, items)
    system_text, system_source = _system_prompt(p, inst, head, factors)
    models = _check_models(p, spec.models)
    constants = dict(spec.constants)
    supply = Suppliers.of(p, inst, constants, factors, lenient=failed)
    user_templates = build_user_templates(p, inst, head.user, items, supply)
    system_templates = build_system_templates(p, factors, system_text, system_source, supply)
    check_format_shown(p, factors, user_templates, system_templates, (default.min, default.max))
    check_item_scales_shown(p, items, scales, default, user_templates, system_templates)
    check_factors_change_prompts(p, factors, (*user_templates, *system_templates.values()))
    bad = (
        None
        if head.stated_instruction is None
        else stated_instruction_problem(head.stated_instruction)
    )
    if bad is not None:
        p.add("[experiment], field 'stated_instruction'", bad)
    languages = next((f.levels for f in factors if f.kind == "language"), None)
    for problem in experiment_translation_problems(table, languages, inst.language):
        p.add("[translations]", problem)
    p.raise_if_any()
    if sha256 is None:
        sha256 = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()
    named_like = None if spec.scale is None else default.nonsubstantive
    by_language = _by_language(table, factors, inst, file, sha256, base_dir, named_like)
    return Experiment(
        name=head.name or (Path(file).stem if file != "<dict>" else "experiment"),
        description=head.description,
        instrument=inst,
        factor_specs=tuple(factors),
        models=models,
        items=items,
        scale_min=default.min,
        scale_max=default.max,
        anchors=dict(default.anchors),
        constants=constants,
        system=system_text,
        system_source=system_source,
        user=head.user,
        path=file,
        sha256=sha256,
        collect=dict(spec.collect) if spec.collect is not None else None,
        nonsubstantive=default.nonsubstantive,
        answers=default.answers,
        stated_instruction=head.stated_instruction,
        _user_templates=user_templates,
        _system_templates=system_templates,
        _by_language=by_language,
    )


def _default_scale(
    inst: Instrument, spec_scale: Any, named_like: tuple[Option, ...] | None
) -> Scale:
    """The experiment's ``[scale]``, else the instrument's; a translated ``[scale]``'s
    options keep the names of ``named_like`` (the experiment's own)."""
    default = inst.response_scale if spec_scale is None else scale_from_spec(spec_scale)
    if named_like is None:
        return default
    return replace(default, nonsubstantive=tuple(
        replace(o, name=own.name) for o, own in zip(default.nonsubstantive, named_like, strict=True)
    ))  # fmt: skip


def _by_language(
    table: dict[str, Any],
    factors: list[Factor],
    inst: Instrument,
    file: str,
    sha256: str,
    base_dir: str | Path | None,
    named_like: tuple[Option, ...] | None,
) -> dict[str, Experiment]:
    """One experiment per level of a ``language`` factor, without the factor (none
    without one): the table translated, on the instrument's translation."""
    by_language: dict[str, Experiment] = {}
    for f in factors:
        if f.kind == "language":
            rest = {**table, "factors": {k: v for k, v in table.get("factors", {}).items()
                                         if k != f.name}}  # fmt: skip
            for lv in f.levels:
                by_language[lv] = experiment_from_dict(
                    translated_experiment(rest, lv), file=file, sha256=sha256,
                    base_dir=base_dir, _instrument=inst.translated(lv),
                    _options_named_like=named_like,
                )  # fmt: skip
    return by_language


def _instrument_of(p: Problems, ref: str, base_dir: str | Path | None) -> Instrument:
    """The instrument named by ``[experiment] instrument`` (a path relative to ``base_dir``)."""
    target: str | Path = ref
    if ref not in builtin_instruments() and base_dir is not None:
        candidate = Path(base_dir) / ref
        target = candidate if candidate.is_file() or ref.endswith(".toml") else ref
    try:
        return load_instrument(target)
    except ConfigError as exc:
        p.add("[experiment], field 'instrument'", str(exc))
        raise p.error() from None


def _select_items(p: Problems, inst: Instrument, chosen: list[str] | None) -> tuple[Item, ...]:
    """The items administered: ``[experiment] items`` of the instrument, or all of them."""
    if chosen is None:
        return inst.items
    where, known = "[experiment], field 'items'", inst.item_ids
    bad = [x for x in chosen if x not in known]
    for x in bad:
        p.add(where, f"unknown item id {x!r}{suggest(x, known)}")
    dup = [x for x, n in Counter(chosen).items() if n > 1]
    if dup:
        p.add(where, f"duplicate item ids {dup}")
    return inst.items if bad or dup else tuple(inst.item(x) for x in chosen)


def _system_prompt(
    p: Problems, inst: Instrument, head: ExperimentHead, factors: list[Factor]
) -> tuple[str, str]:
    """The fixed system-prompt template ("" if none or varying) and where it comes from."""
    framing_factors = [f.name for f in factors if f.kind == "framing"]
    framing, system = head.framing, head.system
    if framing_factors and (framing is not None or system is not None):
        p.add(
            "[experiment]",
            f"'framing'/'system' conflict with the framing factor {framing_factors[0]!r}; drop one",
        )
    elif framing is not None and system is not None:
        p.add(
            "[experiment]",
            "give either 'framing' (a framing of the instrument) or 'system' (a template), not both",
        )
    elif framing_factors:
        return "", f"varies with factor {framing_factors[0]!r}"
    elif system is not None:
        return system, "custom template" if system else "none (empty system prompt)"
    else:
        chosen = inst.default_framing if framing is None else framing
        if chosen and chosen not in inst.framings:
            p.add(
                "[experiment], field 'framing'",
                f"unknown framing {chosen!r}{suggest(chosen, inst.framings)}; "
                f"framings of {inst.name}: {', '.join(inst.framings) or 'none'}",
            )
        elif chosen:
            return inst.framings[chosen], f"fixed framing {chosen!r}"
        else:
            return "", "none (empty system prompt)"
    return "", "none"


def _check_models(p: Problems, models: list[ModelSpec]) -> list[dict[str, Any]]:
    """One dict per model level (``name``, ``source``, further keys), names unique."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for k, m in enumerate(models):
        k = p.file_index("models", k)
        name = m.name or m.source
        if name in seen:
            p.add(
                f"model {name!r} (models[{k}])",
                f"duplicate model name {name!r} (first used by models[{seen[name]}])",
            )
            continue
        seen[name] = k
        rest = m.model_dump(exclude_unset=True, exclude={"name", "source"})
        out.append({"name": name, "source": m.source, **rest})
    return out
