"""The design of context: the administration factor and item orders in an experiment file."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import numpy as np
import pytest

from xlikert.core.errors import ConfigError, DesignError
from xlikert.design import load_experiment
from xlikert.design.item_order import item_orders


def experiment(tmp_path: Path, factors: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(
        '[experiment]\nname = "t"\ninstrument = "cetscale"\nitems = ["1", "2", "3", "4"]\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n' + textwrap.dedent(factors),
        encoding="utf-8",
    )
    return path


def ordered(levels: str) -> str:
    """Sequential administration and an item-order factor ``asked`` with these levels."""
    return (
        '[factors.administration]\nlevels = ["sequential"]\n\n'
        f'[factors.asked]\nkind = "item_order"\nlevels = {levels}\n'
    )


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
def test_the_latin_square_puts_every_item_at_every_position_and_balances_carry_over(K):
    rows = list(item_orders([str(k) for k in range(K)], ["latin_square"]).values())
    assert len(rows) == (K if K % 2 == 0 else 2 * K)
    for pos in range(K):  # each item equally often at each position
        counts = np.bincount([r[pos] for r in rows], minlength=K)
        assert (counts == counts[0]).all()
    follows = np.zeros((K, K), dtype=int)  # how often item b comes right after item a
    for r in rows:
        for a, b in itertools.pairwise(r):
            follows[a, b] += 1
    off = follows[~np.eye(K, dtype=bool)]
    assert (off == off[0]).all() and (np.diag(follows) == 0).all()


def test_orders_by_name_and_bad_ones_named():
    got = item_orders(["a", "b", "c"], ["reversed", "rotation2", ("mine", ["c", "a", "b"])])
    assert got == {"reversed": [2, 1, 0], "rotation2": [2, 0, 1], "mine": [2, 0, 1]}
    with pytest.raises(DesignError, match="unknown item order 'shuffled'"):
        item_orders(["a", "b"], ["shuffled"])
    with pytest.raises(DesignError, match=r"item order 'mine': \['a', 'a'\] is not a permutation"):
        item_orders(["a", "b"], [("mine", ["a", "a"])])
    with pytest.raises(DesignError, match="given twice"):
        item_orders(["a", "b"], ["reversed", "reversed"])


def test_an_experiment_file_gives_the_factors_and_the_item_positions(tmp_path):
    path = experiment(tmp_path, ordered('{as_listed = "1 2 3 4", mine = "3 1 4 2"}'))
    ds = load_experiment(path).build_prompts()
    assert dict(ds.sizes) == {"target": 1, "administration": 1, "asked": 2, "item": 4}
    pos = ds.item_position.sel(asked="mine").values.tolist()
    assert pos == [1, 3, 0, 2]  # item 3 first, then 1, 4, 2
    # the order changes no text: the conversation does
    assert (ds.user.sel(asked="mine") == ds.user.sel(asked="as_listed")).all()


def test_an_item_order_without_sequential_administration_is_refused_by_name(tmp_path):
    body = """
        [factors.asked]
        kind = "item_order"
        levels = ["as_listed", "reversed"]
        """
    with pytest.raises(ConfigError, match=r"factor 'asked'.*changes no prompt under isolated"):
        load_experiment(experiment(tmp_path, body))
    both = '[factors.administration]\nlevels = ["isolated", "sequential"]\n' + body
    with pytest.raises(ConfigError, match=r"factor 'asked'.*changes no prompt under isolated"):
        load_experiment(experiment(tmp_path, both))
    bad = '[factors.administration]\nlevels = ["together"]\n'
    with pytest.raises(ConfigError, match=r"factor 'administration': levels must be among"):
        load_experiment(experiment(tmp_path, bad))


def test_prompts_shows_the_conversation_of_a_history(tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main

    path = experiment(tmp_path, ordered('["reversed"]'))
    res = CliRunner().invoke(main, ["prompts", str(path), "-n", "0", "--history", "3,5"])
    assert res.exit_code == 0, res.output
    text = res.output.split("--- conversation after the answers [3, 5]")[1]
    assert "asked=reversed, item asked=2" in text
    # item 4 then item 3 were asked and answered 3 and 5: the roles in order
    roles = [line for line in text.splitlines() if line.startswith("[")]
    assert roles == ["[system]", "[user]", "[assistant]", "[user]", "[assistant]", "[user]"]
    assert "[assistant]\n3\n" in text and "[assistant]\n5\n" in text
    res = CliRunner().invoke(main, ["prompts", str(path), "-n", "0", "--history", "3,9"])
    assert res.exit_code != 0 and "[9] not on the scale" in res.output
