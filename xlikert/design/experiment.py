"""Fully crossed experiments: factors x items -> every rendered prompt.

An :class:`Experiment` names an instrument, the non-model factors (:class:`Factor`)
and their levels, and the models; :meth:`Experiment.build_prompts` renders every
prompt (its arrays assembled in :mod:`xlikert.design.prompts`). Experiment files
are read by :mod:`xlikert.design.parser` (format in ``xlikert/design/README.md``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import xarray as xr

from ..core.errors import ConfigError, UnknownNameError
from ..core.schema import PROMPT_VARIABLES
from .formats import ResponseFormat
from .instrument import Instrument
from .items import Item, describe_item_scales, has_item_scales
from .perturbation import Perturbation
from .prompts import (
    build_languages,
    format_labels,
    item_positions,
    per_item_variables,
    prompt_attrs,
    render_condition,
)
from .scale import Option, Scale, ShownScale
from .template import Template

__all__ = [
    "Experiment",
    "Factor",
]


@dataclass(frozen=True)
class Factor:
    """A non-model factor: its kind, its ordered level labels and what each level binds.

    ``bindings[level]`` maps placeholder names to text; for a ``framing`` factor
    ``systems[level]`` is the system-prompt template of that level; for a
    ``format`` factor ``formats[level]`` is the level's
    :class:`~xlikert.design.formats.ResponseFormat` (its bindings are the scale
    placeholders as that format renders them).
    """

    name: str
    kind: str
    levels: tuple[str, ...]
    bindings: dict[str, dict[str, str]]
    systems: dict[str, str] = field(default_factory=dict)
    description: str = ""
    formats: dict[str, ResponseFormat] = field(default_factory=dict)
    #: For an ``item_order`` factor: each level's order of the items (indices, as asked).
    orders: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: For a ``perturbation`` factor: each level's rule (:mod:`xlikert.design.perturbation`).
    perturbations: dict[str, Perturbation] = field(default_factory=dict)

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
    nonsubstantive, answers
        The effective scale's non-substantive options and how it is answered
        (:class:`~xlikert.design.scale.Scale`); an item with its own options
        (:attr:`Item.scale <xlikert.design.Item>`) keeps them.
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
    nonsubstantive: tuple[Option, ...] = ()
    answers: Literal["codes", "letters", "labels"] = "codes"
    stated_instruction: str | None = None
    _user_templates: tuple[Template, ...] = field(default=(), compare=False)
    _system_templates: dict[str, Template] = field(default_factory=dict, compare=False)
    #: With a ``language`` factor: each language's experiment (its instrument translated).
    _by_language: dict[str, Experiment] = field(default_factory=dict, compare=False)

    @property
    def user_templates(self) -> tuple[Template, ...]:
        """Each item's user template, in item order.

        The experiment's ``user`` with the item's text and scale placeholders in it.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> exp = load_experiment("formats")
        >>> len(exp.user_templates) == len(exp.items)
        True
        """
        return self._user_templates

    @property
    def language_experiments(self) -> dict[str, Experiment]:
        """Each language's experiment by level (its instrument translated), else empty.

        Filled where the experiment has a ``language`` factor.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("formats").language_experiments
        {}
        """
        return dict(self._by_language)

    @property
    def factors(self) -> dict[str, list[str]]:
        """Each non-model factor's name and its level labels, in file order.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("formats").factors["format"]
        ['original', 'reversed', 'letters']
        """
        return {f.name: list(f.levels) for f in self.factor_specs}

    def factor(self, name: str) -> Factor:
        """One non-model factor by name.

        Parameters
        ----------
        name : str
            The factor's name (a key of :attr:`factors`).

        Returns
        -------
        Factor
            Its kind (``lexicon``, ``framing``, ``format``, ...), levels and the
            placeholder values each level binds.

        Raises
        ------
        UnknownNameError
            No factor of that name (also a :class:`KeyError`), naming it, the
            experiment and its factors.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> fmt = load_experiment("formats").factor("format")
        >>> fmt.kind, fmt.levels
        ('format', ('original', 'reversed', 'letters'))
        """
        for f in self.factor_specs:
            if f.name == name:
                return f
        names = ", ".join(f.name for f in self.factor_specs) or "none"
        raise UnknownNameError(
            f"experiment {self.name!r} has no factor {name!r}; its factors: {names}"
        )

    @property
    def format_factor(self) -> Factor | None:
        """The factor of kind ``format`` (None without one).

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("formats").format_factor.name
        'format'
        >>> load_experiment("demo").format_factor is None
        True
        """
        return next((f for f in self.factor_specs if f.kind == "format"), None)

    def answer_labels(self) -> dict[str, dict[int, str]]:
        """Format level -> score -> answer label (``{}`` without a format factor).

        Returns
        -------
        dict of str to dict of int to str
            For each level of :attr:`format_factor`, the label that answers each
            score of the scale.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> labels = load_experiment("formats").answer_labels()
        >>> labels["letters"][1], labels["letters"][7], labels["original"][7]
        ('A', 'G', '7')
        """
        f = self.format_factor
        if f is None:
            return {}
        return {
            lv: f.formats[lv].labels_by_score(self.scale_min, self.scale_max) for lv in f.levels
        }

    @property
    def response_scale(self) -> Scale:
        """The effective scale: the options of every item without its own.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("anes96_survey").response_scale.scores
        range(1, 8)
        """
        return Scale(
            self.scale_min, self.scale_max, dict(self.anchors), self.nonsubstantive, self.answers
        )

    def scale_of(self, item_id: str) -> Scale:
        """The response options of one administered item.

        Parameters
        ----------
        item_id : str
            The item's id.

        Returns
        -------
        Scale
            The item's own :class:`~xlikert.design.scale.Scale`, else :attr:`response_scale`.

        Raises
        ------
        UnknownNameError
            No administered item has that id (also a :class:`KeyError`).

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("anes96_survey").scale_of("vote").describe()
        '0..1 (0=Bill Clinton, 1=Bob Dole)'
        """
        for it in self.items:
            if it.id == item_id:
                return it.scale or self.response_scale
        names = ", ".join(it.id for it in self.items)
        raise UnknownNameError(
            f"experiment {self.name!r} administers no item {item_id!r}; its items: {names}"
        )

    @property
    def per_item(self) -> bool:
        """True when the prompts record each item's options (see :meth:`build_prompts`).

        That is when some item has its own options or is nominal, or the scale has
        non-substantive options or is answered with letters or labels.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("anes96_survey").per_item, load_experiment("demo").per_item
        (True, False)
        """
        return has_item_scales(self.items, self.response_scale)

    @property
    def model_names(self) -> list[str]:
        """The ``name`` of each model entry: the levels of the ``model`` dim of the results.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("demo").model_names
        ['SmolLM2-135M-Instruct', 'Qwen2.5-Coder-0.5B-Instruct', 'Gemma-3-270M']
        """
        return [m["name"] for m in self.models]

    @property
    def n_conditions(self) -> int:
        """Number of cells of the non-model cross.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("formats").n_conditions  # 4 targets x 3 formats
        12
        """
        return math.prod(len(f.levels) for f in self.factor_specs)

    @property
    def n_prompts(self) -> int:
        """Number of distinct prompts: conditions x items.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> load_experiment("formats").n_prompts  # 12 conditions x 17 items
        204
        """
        return self.n_conditions * len(self.items)

    def shown_scales(self) -> dict[str | None, tuple[ShownScale, ...]]:
        """Format level (None without a format factor) -> each item's options as shown.

        Returns
        -------
        dict of str or None to tuple of ShownScale
            Per format level, one :class:`~xlikert.design.scale.ShownScale` per
            administered item (in order): its answer labels and the values of its
            scale placeholders under that level.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> shown = load_experiment("anes96_survey").shown_scales()[None]
        >>> shown[4].labels  # the vote, answered by its codes
        {0: '0', 1: '1'}
        """
        fmt = self.format_factor
        levels: list[str | None] = list(fmt.levels) if fmt is not None else [None]
        cache: dict[tuple, ShownScale] = {}
        out = {}
        for lv in levels:
            form = fmt.formats[lv] if fmt is not None and lv is not None else None
            shown = []
            for it in self.items:
                scale = self.scale_of(it.id)
                key = (lv, scale.key)
                if key not in cache:
                    cache[key] = scale.show(form)
                shown.append(cache[key])
            out[lv] = tuple(shown)
        return out

    def build_prompts(self) -> xr.Dataset:
        """Render every (condition, item) prompt into a Dataset.

        Every template is rendered with the item's own scale placeholders
        (``{anchors}``, ``{options}``, ...), the system prompt included.

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
            ``instrument_file``, ``experiment``, ``experiment_sha256``. With a
            format factor, ``answer_label (<format factor>, score)``. When the
            items' options are recorded per item (:attr:`per_item`), the ``score``
            axis is the union of the items' points (``scale_min``/``scale_max``
            its ends) and the Dataset adds :data:`xlikert.core.schema.ITEM_SCALE_VARIABLES`.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> ds = load_experiment("demo").build_prompts()
        >>> dict(ds.sizes)
        {'target': 4, 'item': 17}
        >>> str(ds.user.sel(target="Canada", item="1").item())
        'Canadians should always buy Canadian-made products instead of imports.'
        """
        specs = self.factor_specs
        if self._by_language:
            return build_languages(self)
        shape = [len(f.levels) for f in specs]
        system = np.empty([*shape, len(self.items)], dtype=object)
        user = np.empty([*shape, len(self.items)], dtype=object)
        shown = self.shown_scales()
        for idx in itertools.product(*(range(n) for n in shape)):
            values = dict(self.constants)
            sys_t = self._system_templates.get("", None)
            level = None
            noise = None
            for f, i in zip(specs, idx, strict=True):
                values.update(f.bindings[f.levels[i]])
                if f.kind == "framing":
                    sys_t = self._system_templates[f"{f.name}:{f.levels[i]}"]
                level = f.levels[i] if f.kind == "format" else level
                noise = f.perturbations[f.levels[i]] if f.kind == "perturbation" else noise
            try:
                render_condition(self, idx, values, sys_t, shown[level], system, user, noise)
            except KeyError as exc:  # pragma: no cover - prevented by the checks at load time
                cond = ", ".join(
                    f"{f.name}={f.levels[i]!r}" for f, i in zip(specs, idx, strict=True)
                )
                raise ConfigError(
                    f"{self.path}: no value for placeholder {exc} at {cond}"
                ) from None
        coords: dict[str, Any] = {f.name: np.array(f.levels, dtype=str) for f in specs}
        coords["item"] = np.array([it.id for it in self.items], dtype=str)
        coords["reverse_keyed"] = (
            "item",
            np.array([it.reverse_keyed for it in self.items], dtype=bool),
        )
        coords["subscale"] = ("item", np.array([it.subscale for it in self.items], dtype=str))
        dims = [*(f.name for f in specs), "item"]
        extra = per_item_variables(self, shown) if self.per_item else format_labels(self)
        extra = extra.merge(item_positions(self, specs))
        ds = xr.Dataset(
            {
                "system": (dims, system.astype(str), dict(PROMPT_VARIABLES["system"].attrs)),
                "user": (dims, user.astype(str), dict(PROMPT_VARIABLES["user"].attrs)),
            },
            coords=coords,
            attrs=prompt_attrs(self),
        )
        if self.stated_instruction is not None:
            attrs = dict(PROMPT_VARIABLES["stated_instruction"].attrs)
            ds["stated_instruction"] = ((), self.stated_instruction, attrs)
        return ds.merge(extra, combine_attrs="override")

    def summary(self) -> str:
        """A human-readable description of the design (what ``xlikert prompts`` prints).

        Returns
        -------
        str
            The experiment, its instrument and scale, the system prompt's source,
            each factor with its levels, the models, and the count of prompts and
            forward passes.

        Examples
        --------
        >>> from xlikert.design import load_experiment
        >>> print(load_experiment("formats").summary())
        Experiment  formats  (...formats.toml)
        Instrument  cetscale: Consumer Ethnocentric Tendencies Scale (CETSCALE)
                    17 items, scale 1..7 (1=Strongly disagree, 7=Strongly agree)
        System      custom template
        Factors     2
          target (lexicon, 4 levels): USA, China, Canada, France
          format (format, 3 levels): original, reversed, letters
        Models      1 (crossed at collection)
          SmolLM2-135M-Instruct: smollm2-135m-instruct
        Prompts     4 x 3 = 12 conditions x 17 items = 204 prompts  (x 1 models = ...
        """
        inst = self.instrument
        lines = [
            f"Experiment  {self.name}  ({self.path})",
            f"Instrument  {inst.name}: {inst.title}",
            f"            {len(self.items)} items, scale {self.scale_min}..{self.scale_max} "
            f"({', '.join(f'{k}={v}' for k, v in sorted(self.anchors.items()))})",
            *describe_item_scales(self.items, self.response_scale, indent=" " * 12),
        ]
        keyed = sum(it.reverse_keyed for it in self.items)
        subs = list(dict.fromkeys(it.subscale for it in self.items if it.subscale))
        if keyed or subs:
            lines.append(
                f"            reverse-keyed items: {keyed}; subscales: {', '.join(subs) or 'none'}"
            )
        if self._by_language:  # where each language's text comes from
            lines.append("Languages   " + "; ".join(
                f"{lv}: {inst.sources.get(lv) or 'source not stated'}" for lv in self._by_language
            ))  # fmt: skip
        lines.append(f"System      {self.system_source}")
        lines.append(f"Factors     {len(self.factor_specs)}")
        for f in self.factor_specs:
            n = len(f.levels)
            lines.append(f"  {f.name} ({f.kind}, {n} level{'s' * (n != 1)}): {', '.join(f.levels)}")
            lines += [f"    {lv}: {r.text}" for lv, r in f.perturbations.items()]
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
        admin = next((f for f in self.factor_specs if f.kind == "administration"), None)
        if self.models and (admin is None or "sequential" not in admin.levels):
            line += f"  (x {len(self.models)} models = {self.n_prompts * len(self.models)} forward passes)"
        lines.append(line)
        if admin is not None and "sequential" in admin.levels:
            n_points = self.scale_max - self.scale_min + 1
            tree = sum(n_points**j for j in range(len(self.items)))
            lines.append(
                f"Sequential  each sequential condition is one conversation: up to {tree} "
                "histories (forward passes) per model, fewer where tol prunes them"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<xlikert.Experiment>\n{self.summary()}"
