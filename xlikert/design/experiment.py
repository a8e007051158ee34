"""Fully crossed experiments: factors x items -> every rendered prompt.

An experiment file (TOML; format in ``xlikert/design/README.md``) names an
instrument, the non-model factors and their levels, and the models. Every
template used is checked against the fields each factor level supplies when
the file is loaded, so :meth:`Experiment.build_prompts` cannot fail half-way.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..dims import check_factor_name
from ..errors import ConfigError, DesignError
from ._schema import Problems, read_toml, suggest
from .instrument import (
    SCALE_FIELDS,
    Instrument,
    Item,
    _parse_scale,
    _parse_template,
    _resolve,
    builtin_instruments,
    load_instrument,
    scale_fields,
)
from .template import Template

__all__ = [
    "Experiment",
    "Factor",
    "builtin_experiments",
    "experiment_from_dict",
    "load_experiment",
    "prompts_to_frame",
]

#: Names no factor, lexicon field or constant may take (factors also avoid the
#: names of xlikert.dims: its auxiliary dims and the variables it writes).
RESERVED = frozenset(
    {"item", "score", "model", "system", "user", "reverse_keyed", "subscale", *SCALE_FIELDS}
)
KINDS = ("lexicon", "framing", "free")

_TOP_KEYS = ("experiment", "factors", "models", "constants", "scale", "collect")
_EXPERIMENT_KEYS = ("name", "description", "instrument", "framing", "system", "user", "items")
_FACTOR_KEYS = ("kind", "levels", "description")


def _provenance_path(path: str) -> str:
    """A built-in file as ``<xlikert>/design/...``, so results carry no local directory."""
    package = Path(__file__).resolve().parents[1]
    try:
        return f"<xlikert>/{Path(path).resolve().relative_to(package).as_posix()}"
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Factor:
    """A non-model factor: its kind, its ordered level labels and what each level binds.

    ``bindings[level]`` maps placeholder names to text; for a ``framing`` factor
    ``systems[level]`` is the system-prompt template of that level.
    """

    name: str
    kind: str
    levels: tuple[str, ...]
    bindings: dict[str, dict[str, str]]
    systems: dict[str, str] = field(default_factory=dict)
    description: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """Every placeholder name bound by at least one level."""
        out: dict[str, None] = {}
        for b in self.bindings.values():
            out.update(dict.fromkeys(b))
        return tuple(out)


@dataclass(frozen=True, repr=False)
class Experiment:
    """A fully crossed experiment loaded from a TOML file.

    Attributes
    ----------
    name, description
        Identification.
    instrument
        The :class:`~xlikert.design.Instrument`.
    factors
        Non-model factor name -> ordered level labels (file order).
    models
        One dict per model level: ``name`` (the level label of the ``model``
        factor), ``source`` (a built-in offline zoo name, a Hugging Face id or a
        local path) and any further keys, passed through untouched.
    items
        The items administered (all of the instrument's unless the file selects some).
    scale_min, scale_max, anchors
        The effective scale (the instrument's unless the file overrides it).
    path, sha256
        The experiment file and the sha256 of its bytes.
    collect
        The file's ``[collect]`` table as written (None without one): the run's
        options, validated where the run is set up
        (:meth:`xlikert.collect.CollectOptions.from_mapping`).
    """

    name: str
    description: str
    instrument: Instrument
    factor_specs: tuple[Factor, ...]
    models: list[dict[str, Any]]
    items: tuple[Item, ...]
    scale_min: int
    scale_max: int
    anchors: dict[int, str]
    constants: dict[str, str]
    system: str
    system_source: str
    user: str
    path: str
    sha256: str
    collect: dict[str, Any] | None = None
    _user_templates: tuple[Template, ...] = field(default=(), compare=False)
    _system_templates: dict[str, Template] = field(default_factory=dict, compare=False)

    @property
    def factors(self) -> dict[str, list[str]]:
        return {f.name: list(f.levels) for f in self.factor_specs}

    def factor(self, name: str) -> Factor:
        for f in self.factor_specs:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def model_names(self) -> list[str]:
        return [m["name"] for m in self.models]

    @property
    def n_conditions(self) -> int:
        """Number of cells of the non-model cross."""
        return math.prod(len(f.levels) for f in self.factor_specs)

    @property
    def n_prompts(self) -> int:
        """Number of distinct prompts: conditions x items."""
        return self.n_conditions * len(self.items)

    def build_prompts(self) -> xr.Dataset:
        """Render every (condition, item) prompt into a Dataset.

        Returns
        -------
        xr.Dataset
            Data variables ``system`` and ``user`` (str) with dims
            ``(*factors, "item")`` in file order; coords: each factor with its
            level labels, ``item`` (string ids), and on ``item`` the non-index
            coords ``reverse_keyed`` (bool) and ``subscale`` (str, "" if none).
            ``system`` is "" when there is no system prompt. Attrs:
            ``instrument``, ``instrument_title``, ``citation``, ``scale_min``,
            ``scale_max``, ``scale_labels`` (JSON object), ``instrument_sha256``,
            ``instrument_file``, ``experiment``, ``experiment_sha256``.

        Examples
        --------
        >>> ds = load_experiment("demo").build_prompts()
        >>> dict(ds.sizes)
        {'target': 4, 'item': 17}
        >>> str(ds.user.sel(target="Canada", item="1").item())
        'Canadians should always buy Canadian-made products instead of imports.'
        """
        specs = self.factor_specs
        shape = [len(f.levels) for f in specs]
        n_items = len(self.items)
        system = np.empty([*shape, n_items], dtype=object)
        user = np.empty([*shape, n_items], dtype=object)
        base = {**scale_fields(self.scale_min, self.scale_max, self.anchors), **self.constants}
        fixed = self._system_templates.get("", None)
        for idx in itertools.product(*(range(n) for n in shape)):
            values = dict(base)
            sys_t = fixed
            for f, i in zip(specs, idx, strict=True):
                level = f.levels[i]
                values.update(f.bindings[level])
                if f.kind == "framing":
                    sys_t = self._system_templates[f"{f.name}:{level}"]
            try:
                sys_text = sys_t.render(values) if sys_t is not None else ""
                for k, ut in enumerate(self._user_templates):
                    user[(*idx, k)] = ut.render(values)
            except KeyError as exc:  # pragma: no cover - prevented by the checks at load time
                cond = ", ".join(
                    f"{f.name}={f.levels[i]!r}" for f, i in zip(specs, idx, strict=True)
                )
                raise ConfigError(
                    f"{self.path}: no value for placeholder {exc} at {cond}"
                ) from None
            system[idx] = sys_text
        coords: dict[str, Any] = {f.name: np.array(f.levels, dtype=str) for f in specs}
        coords["item"] = np.array([it.id for it in self.items], dtype=str)
        coords["reverse_keyed"] = (
            "item",
            np.array([it.reverse_keyed for it in self.items], dtype=bool),
        )
        coords["subscale"] = ("item", np.array([it.subscale for it in self.items], dtype=str))
        dims = [*(f.name for f in specs), "item"]
        inst = self.instrument
        attrs = {
            "instrument": inst.name,
            "instrument_title": inst.title,
            "citation": inst.citation,
            "scale_min": int(self.scale_min),
            "scale_max": int(self.scale_max),
            "scale_labels": json.dumps({str(k): v for k, v in sorted(self.anchors.items())}),
            "instrument_sha256": inst.sha256,
            "instrument_file": _provenance_path(inst.path),
            "experiment": self.name,
            "experiment_sha256": self.sha256,
        }
        return xr.Dataset(
            {
                "system": (dims, system.astype(str), {"description": "system message sent"}),
                "user": (dims, user.astype(str), {"description": "user message sent"}),
            },
            coords=coords,
            attrs=attrs,
        )

    def summary(self) -> str:
        """A human-readable description of the design (what ``xlikert prompts`` prints)."""
        inst = self.instrument
        lines = [
            f"Experiment  {self.name}  ({self.path})",
            f"Instrument  {inst.name}: {inst.title}",
            f"            {len(self.items)} items, scale {self.scale_min}..{self.scale_max} "
            f"({', '.join(f'{k}={v}' for k, v in sorted(self.anchors.items()))})",
        ]
        keyed = sum(it.reverse_keyed for it in self.items)
        subs = list(dict.fromkeys(it.subscale for it in self.items if it.subscale))
        if keyed or subs:
            lines.append(
                f"            reverse-keyed items: {keyed}; subscales: {', '.join(subs) or 'none'}"
            )
        lines.append(f"System      {self.system_source}")
        lines.append(f"Factors     {len(self.factor_specs)}")
        for f in self.factor_specs:
            n = len(f.levels)
            lines.append(f"  {f.name} ({f.kind}, {n} level{'s' * (n != 1)}): {', '.join(f.levels)}")
        if self.models:
            lines.append(f"Models      {len(self.models)} (crossed at collection)")
            for m in self.models:
                extra = {k: v for k, v in m.items() if k not in ("name", "source")}
                more = f"  {extra}" if extra else ""
                lines.append(f"  {m['name']}: {m['source']}{more}")
        else:
            lines.append("Models      none listed")
        sizes = " x ".join(str(len(f.levels)) for f in self.factor_specs)
        conds = (
            f"{sizes} = {self.n_conditions}"
            if len(self.factor_specs) > 1
            else str(self.n_conditions)
        )
        line = (
            f"Prompts     {conds} conditions x {len(self.items)} items = {self.n_prompts} prompts"
        )
        if self.models:
            line += f"  (x {len(self.models)} models = {self.n_prompts * len(self.models)} forward passes)"
        lines.append(line)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<xlikert.Experiment>\n{self.summary()}"


def prompts_to_frame(ds: xr.Dataset):
    """One row per prompt: factor levels, item, reverse_keyed, subscale, system, user.

    Examples
    --------
    >>> df = prompts_to_frame(load_experiment("demo").build_prompts())
    >>> list(df.columns)
    ['target', 'item', 'reverse_keyed', 'subscale', 'system', 'user']
    >>> len(df)
    68
    """
    import pandas as pd

    dims = list(ds.user.dims)
    rows = {}
    grids = np.meshgrid(*(np.asarray(ds[d].values) for d in dims), indexing="ij")
    for d, g in zip(dims, grids, strict=True):
        rows[d] = g.ravel()
    item_pos = np.meshgrid(*(np.arange(ds.sizes[d]) for d in dims), indexing="ij")[
        dims.index("item")
    ].ravel()
    rows["reverse_keyed"] = np.asarray(ds["reverse_keyed"].values)[item_pos]
    rows["subscale"] = np.asarray(ds["subscale"].values)[item_pos]
    rows["system"] = np.asarray(ds["system"].values).ravel()
    rows["user"] = np.asarray(ds["user"].values).ravel()
    return pd.DataFrame(rows)


def _experiment_dir():
    return resources.files("xlikert.design").joinpath("experiments")


def builtin_experiments() -> list[str]:
    """Names of the experiments shipped with xlikert (``"demo"``, ``"paper"``, ``"framing"``, ...)."""
    return sorted(
        p.name.removesuffix(".toml")
        for p in _experiment_dir().iterdir()
        if p.name.endswith(".toml")
    )


def load_experiment(path_or_builtin: str | Path) -> Experiment:
    """Load and validate an experiment file, or a built-in experiment by name.

    Parameters
    ----------
    path_or_builtin
        Path of a TOML experiment file, or a built-in name (``"demo"``: the
        offline demo, 3 zoo models x 4 targets on CETSCALE; ``"paper"``: the
        paper's 5 x 4 design; ``"framing"``: 3 models x 4 targets x 6 framings).

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
    path = _resolve(path_or_builtin, "experiment", _experiment_dir(), builtin_experiments())
    table, digest = read_toml(path)
    return experiment_from_dict(table, file=str(path), sha256=digest, base_dir=path.parent)


def experiment_from_dict(
    table: dict[str, Any],
    *,
    file: str = "<dict>",
    sha256: str | None = None,
    base_dir: str | Path | None = None,
) -> Experiment:
    """Build an :class:`Experiment` from an already parsed table (same schema as the file).

    ``base_dir`` resolves a relative instrument path; ``sha256`` defaults to the
    hash of the table's canonical JSON.
    """
    p = Problems(file)
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: an experiment must be a table, got {type(table).__name__}")
    p.unknown_keys(table, _TOP_KEYS, "top level")
    head = p.get(table, "experiment", dict, "top level", default={}) or {}
    p.unknown_keys(head, _EXPERIMENT_KEYS, "[experiment]")
    default_name = Path(file).stem if file != "<dict>" else "experiment"
    name = p.get(head, "name", str, "[experiment]", default=default_name) or default_name
    description = p.get(head, "description", str, "[experiment]", default="") or ""

    # --- instrument ----------------------------------------------------------
    inst_ref = p.get(head, "instrument", str, "[experiment]")
    inst: Instrument | None = None
    if inst_ref is not None and not inst_ref.strip():
        p.add("[experiment]", "field 'instrument' is empty; give a built-in name or a .toml path")
    elif inst_ref:
        ref: str | Path = inst_ref
        if inst_ref not in builtin_instruments() and base_dir is not None:
            candidate = Path(base_dir) / inst_ref
            ref = candidate if candidate.is_file() or inst_ref.endswith(".toml") else inst_ref
        try:
            inst = load_instrument(ref)
        except ConfigError as exc:
            p.add("[experiment], field 'instrument'", str(exc))
    if inst is None:
        p.raise_if_any()
        raise AssertionError("unreachable")  # pragma: no cover

    # --- scale (optional override) --------------------------------------------
    lo, hi, anchors = inst.scale_min, inst.scale_max, dict(inst.anchors)
    if "scale" in table:
        parsed = _parse_scale(p, table["scale"])
        if parsed:
            lo, hi, anchors = parsed

    # --- items (optional subset) ----------------------------------------------
    items = inst.items
    chosen = p.get(head, "items", list, "[experiment]", default=None)
    if chosen is not None:
        ids = [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in chosen]
        known = inst.item_ids
        bad = [x for x in ids if x not in known]
        for x in bad:
            p.add("[experiment], field 'items'", f"unknown item id {x!r}{suggest(str(x), known)}")
        dup = [x for x, n in _counts(ids).items() if n > 1]
        if dup:
            p.add("[experiment], field 'items'", f"duplicate item ids {dup}")
        if not ids:
            p.add("[experiment], field 'items'", "selects no items")
        if not bad and not dup and ids:
            items = tuple(inst.item(x) for x in ids)

    # --- constants ------------------------------------------------------------
    constants: dict[str, str] = {}
    raw_const = p.get(table, "constants", dict, "top level", default={}) or {}
    for key, val in raw_const.items():
        if not key.isidentifier() or key in RESERVED:
            p.add(
                "[constants]",
                f"{key!r} is not a usable placeholder name (reserved or not an identifier)",
            )
        elif not isinstance(val, str):
            p.add("[constants]", f"field {key!r} must be a string, got {val!r}")
        else:
            constants[key] = val

    # --- factors --------------------------------------------------------------
    specs: list[Factor] = []
    raw_factors = p.get(table, "factors", dict, "top level", default={}) or {}
    failed: list[str] = []
    for fname, spec in raw_factors.items():
        f = _parse_factor(p, inst, fname, spec)
        if f is not None:
            specs.append(f)
        else:
            failed.append(fname)
    framing_factors = [f for f in specs if f.kind == "framing"]
    if len(framing_factors) > 1:
        p.add(
            "[factors]",
            f"only one framing factor may set the system prompt, got {[f.name for f in framing_factors]}",
        )

    # --- system prompt --------------------------------------------------------
    fixed_framing = p.get(head, "framing", str, "[experiment]", default=None)
    fixed_system = p.get(head, "system", str, "[experiment]", default=None)
    system_text, system_source = "", "none"
    if framing_factors and (fixed_framing is not None or fixed_system is not None):
        p.add(
            "[experiment]",
            f"'framing'/'system' conflict with the framing factor {framing_factors[0].name!r}; drop one",
        )
    elif fixed_framing is not None and fixed_system is not None:
        p.add(
            "[experiment]",
            "give either 'framing' (a framing of the instrument) or 'system' (a template), not both",
        )
    elif framing_factors:
        system_source = f"varies with factor {framing_factors[0].name!r}"
    elif fixed_system is not None:
        system_text = fixed_system
        system_source = "custom template" if fixed_system else "none (empty system prompt)"
    else:
        chosen_framing = inst.default_framing if fixed_framing is None else fixed_framing
        if chosen_framing and chosen_framing not in inst.framings:
            p.add(
                "[experiment], field 'framing'",
                f"unknown framing {chosen_framing!r}{suggest(chosen_framing, inst.framings)}; "
                f"framings of {inst.name}: {', '.join(inst.framings) or 'none'}",
            )
        elif chosen_framing:
            system_text = inst.framings[chosen_framing]
            system_source = f"fixed framing {chosen_framing!r}"
        else:
            system_source = "none (empty system prompt)"

    user_text = p.get(head, "user", str, "[experiment]", default="{item}")
    user_text = "{item}" if user_text is None else user_text

    # --- models ---------------------------------------------------------------
    models = _parse_models(p, table.get("models", []))
    # --- collection options (checked by xlikert.collect where the run is set up) ---
    collect_table = p.get(table, "collect", dict, "top level", default=None)

    # --- which factor supplies each placeholder --------------------------------
    owner: dict[str, str] = {k: "the scale" for k in SCALE_FIELDS}
    for key in constants:
        owner[key] = "[constants]"
    for f in specs:
        declared = f.fields
        if f.kind == "lexicon":  # an inline level lacking a lexicon field is reported per level
            declared = tuple(dict.fromkeys((*f.fields, *inst.lexicon_fields)))
        for key in declared:
            if key in RESERVED:
                p.add(f"factor {f.name!r}", f"field {key!r} is reserved")
            elif key in owner:
                p.add(
                    f"factor {f.name!r}",
                    f"field {key!r} is also supplied by {owner[key]}; rename one",
                )
            else:
                owner[key] = f"factor {f.name!r}"
    by_factor = {f"factor {f.name!r}": f for f in specs}

    def check(t: Template | None, where: str) -> None:
        if t is None:
            return
        for ph in t.fields:
            src = owner.get(ph)
            if src is None and failed:
                continue  # may belong to a factor that failed to parse (reported above)
            if src is None:
                known = sorted(owner)
                p.add(
                    where,
                    f"unknown placeholder {{{ph}}}{suggest(ph, known)}: no factor, lexicon field or "
                    f"constant supplies it; known: {', '.join(known)}",
                )
            elif src in by_factor:
                f = by_factor[src]
                for level in f.levels:
                    if ph not in f.bindings[level]:
                        what = "lexicon field" if f.kind == "lexicon" else "field"
                        p.add(
                            where,
                            f"{f.name} level {level!r} has no {what} {ph!r} for placeholder {{{ph}}}",
                        )

    user_t = _parse_template(p, user_text, "[experiment], field 'user'")
    if user_t is not None and "item" not in user_t.fields:
        p.add("[experiment], field 'user'", "the user template must contain {item} (the item text)")
    user_templates: list[Template] = []
    if user_t is not None:
        owner["item"] = "the item text"  # {item} is only valid in the user template
        check(user_t, "[experiment], field 'user'")
        del owner["item"]
        for it in items:
            item_t = inst.templates.get(f"item:{it.id}") or Template.parse(it.template)
            check(item_t, f"instrument {inst.path}: item {it.id!r}, field 'template'")
            user_templates.append(user_t.splice("item", item_t))
    system_templates: dict[str, Template] = {}
    if framing_factors:
        f = framing_factors[0]
        for level in f.levels:
            t = _parse_template(p, f.systems[level], f"factor {f.name!r} level {level!r}")
            check(t, f"factor {f.name!r} level {level!r} (system prompt)")
            if t is not None:
                system_templates[f"{f.name}:{level}"] = t
    elif system_text:
        t = _parse_template(p, system_text, f"system prompt ({system_source})")
        check(t, f"system prompt ({system_source})")
        if t is not None:
            system_templates[""] = t

    p.raise_if_any()
    if sha256 is None:
        sha256 = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()
    return Experiment(
        name=name,
        description=description,
        instrument=inst,
        factor_specs=tuple(specs),
        models=models,
        items=tuple(items),
        scale_min=lo,
        scale_max=hi,
        anchors=anchors,
        constants=constants,
        system=system_text,
        system_source=system_source,
        user=user_text,
        path=file,
        sha256=sha256,
        collect=dict(collect_table) if collect_table is not None else None,
        _user_templates=tuple(user_templates),
        _system_templates=system_templates,
    )


def _counts(values: list) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _parse_factor(p: Problems, inst: Instrument, fname: str, spec: Any) -> Factor | None:
    where = f"factor {fname!r}"
    if not isinstance(spec, dict):
        p.add(where, f"must be a table ([factors.{fname}] with levels = [...]), got {spec!r}")
        return None
    if not fname.isidentifier() or fname in RESERVED:
        p.add(where, "factor names must be identifiers other than " + ", ".join(sorted(RESERVED)))
        return None
    try:  # the names of xlikert's own dims and variables (xlikert.dims)
        check_factor_name(fname, where=where)
    except DesignError as exc:
        p.add("", str(exc))
        return None
    p.unknown_keys(spec, _FACTOR_KEYS, where)
    kind = p.get(spec, "kind", str, where, default=None)
    if kind is None:
        if fname == inst.lexicon_factor and inst.lexicon:
            kind = "lexicon"
        elif fname == inst.framing_factor:
            kind = "framing"
        else:
            kind = "free"
    elif kind not in KINDS:
        p.add(where, f"field 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
        return None
    description = p.get(spec, "description", str, where, default="") or ""
    if "levels" not in spec:
        if kind == "lexicon":
            raw: Any = list(inst.lexicon)
        elif kind == "framing":
            raw = list(inst.framings)
        else:
            p.add(where, "field 'levels' is missing (a free factor needs its levels)")
            return None
    else:
        raw = spec["levels"]
    if not isinstance(raw, list | dict):
        p.add(where, f"field 'levels' must be an array or a table, got {raw!r}")
        return None
    if len(raw) == 0:
        p.add(where, "field 'levels' is empty: a factor needs at least one level")
        return None
    levels: list[str] = []
    bindings: dict[str, dict[str, str]] = {}
    systems: dict[str, str] = {}
    n_before = len(p.lines)
    if isinstance(raw, list):
        for k, lv in enumerate(raw):
            if not isinstance(lv, str) or not lv.strip():
                p.add(where, f"levels[{k}] must be a non-empty string, got {lv!r}")
                continue
            if lv in bindings:
                p.add(where, f"duplicate level {lv!r}")
                continue
            if kind == "lexicon":
                if lv not in inst.lexicon:
                    p.add(
                        where,
                        f"level {lv!r} is not in the lexicon of {inst.name}{suggest(lv, inst.lexicon)}; "
                        f"lexicon levels: {', '.join(inst.lexicon) or 'none'} "
                        f"(or give the level's fields inline: [factors.{fname}.levels.{lv}])",
                    )
                    continue
                bindings[lv] = dict(inst.lexicon[lv])
            elif kind == "framing":
                if lv not in inst.framings:
                    p.add(
                        where,
                        f"level {lv!r} is not a framing of {inst.name}{suggest(lv, inst.framings)}; "
                        f"framings: {', '.join(inst.framings) or 'none'}",
                    )
                    continue
                bindings[lv] = {}
                systems[lv] = inst.framings[lv]
            else:
                bindings[lv] = {fname: lv}
            levels.append(lv)
    else:
        for lv, val in raw.items():
            lwhere = f"{where} level {lv!r}"
            if not lv.strip():
                p.add(where, "level names must not be empty")
                continue
            if kind == "framing":
                if not isinstance(val, str):
                    p.add(lwhere, f"must be a string (the system prompt template), got {val!r}")
                    continue
                bindings[lv] = {}
                systems[lv] = val
            elif isinstance(val, str) and kind == "free":
                bindings[lv] = {fname: val}
            elif isinstance(val, dict):
                good: dict[str, str] = {}
                for key, text in val.items():
                    if not key.isidentifier():
                        p.add(lwhere, f"field name {key!r} is not an identifier")
                    elif not isinstance(text, str):
                        p.add(lwhere, f"field {key!r} must be a string, got {text!r}")
                    else:
                        good[key] = text
                if not val:
                    p.add(lwhere, "has no fields")
                bindings[lv] = good
            else:
                want = (
                    "a table of lexicon fields"
                    if kind == "lexicon"
                    else "a string or a table of fields"
                )
                p.add(lwhere, f"must be {want}, got {val!r}")
                continue
            levels.append(lv)
    if len(p.lines) > n_before:
        return None
    # a level label is also available as {factor} unless a level binds that field itself
    if not any(fname in b for b in bindings.values()):
        for lv in levels:
            bindings[lv] = {**bindings[lv], fname: lv}
    return Factor(fname, kind, tuple(levels), bindings, systems, description)


def _parse_models(p: Problems, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        p.add("top level", f"'models' must be an array of tables ([[models]]), got {raw!r}")
        return []
    models: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for k, m in enumerate(raw):
        where = f"models[{k}]"
        if not isinstance(m, dict):
            p.add(where, f"must be a table with name and source, got {m!r}")
            continue
        source = p.get(m, "source", str, where)
        if source is not None and not source.strip():
            p.add(where, "field 'source' is empty")
            continue
        name = p.get(m, "name", str, where, default=source)
        if source is None or name is None:
            continue
        if not name.strip():
            p.add(where, "field 'name' is empty")
            continue
        where = f"model {name!r} ({where})"
        if name in seen:
            p.add(where, f"duplicate model name {name!r} (first used by models[{seen[name]}])")
            continue
        seen[name] = k
        if m.get("trust_remote_code") not in (None, False, True):
            p.add(
                where,
                f"field 'trust_remote_code' must be true or false, got {m['trust_remote_code']!r}",
            )
        models.append({**m, "name": name, "source": source})
    return models
