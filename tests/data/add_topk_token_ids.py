"""Bring ``xlikert/data/demo_results.nc`` to the schema of tokens stored as text.

Since issue 40 a results file stores each top-k token as its text (``topk_token``: its
bytes read as UTF-8, an incomplete character's bytes escaped) with its vocabulary id
beside it (``topk_token_id``). The shipped demo file (numbers measured on 2026-11-22,
see ``make_demo_results.py``) stored the tokenizer's own strings (``'▁Yes'``,
``'ĠThe'``). This script maps each stored string to its id with the model's own
tokenizer (``convert_tokens_to_ids``, a bijection on the vocabulary: a string that is
not a token is refused) and writes the text of that id, as a collection does today.
No number changes. Run from the repository root (``PYTHONPATH=.``)::

    python tests/data/add_topk_token_ids.py
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    from make_demo_results import DEMO
    from transformers import AutoTokenizer

    from xlikert.collect.answers.vocabulary import token_text
    from xlikert.collect.zoo import model_folder
    from xlikert.core.io import read_attrs, to_netcdf
    from xlikert.datasets import load_demo_results

    ds = load_demo_results(verbose=False).load()
    models = read_attrs(ds)["models"]
    if "topk_token_id" in ds:
        raise SystemExit(f"{DEMO} already holds topk_token_id")
    ids = np.full(ds.topk_token.shape, -1, dtype=np.int64)
    text = np.array(ds.topk_token.values, dtype=object)
    axis = ds.topk_token.dims.index("model")
    for m, name in enumerate(ds.model.values):
        folder, _ = model_folder({"name": str(name), "source": models[name]["source"]})
        tok = AutoTokenizer.from_pretrained(folder)
        unk = tok.unk_token_id
        at = [slice(None)] * ids.ndim
        at[axis] = m
        block = text[tuple(at)]
        out = np.full(block.shape, -1, dtype=np.int64)
        shown = np.empty(block.shape, dtype=object)
        for k, s in np.ndenumerate(block):
            if s == "":
                shown[k] = ""
                continue
            i = tok.convert_tokens_to_ids(str(s))
            if i is None or (i == unk and str(s) != tok.unk_token):
                raise SystemExit(f"{name}: stored top-k token {s!r} is not a token")
            out[k] = i
            shown[k] = token_text(tok, i)
        ids[tuple(at)] = out
        text[tuple(at)] = shown
    new = ds.copy()
    new["topk_token"] = (ds.topk_token.dims, text.astype(str), ds.topk_token.attrs)
    new["topk_token_id"] = (ds.topk_token.dims, ids)
    new.attrs["history"] = (
        str(ds.attrs.get("history", ""))
        + "\ntop-k tokens stored as text with their ids (tests/data/add_topk_token_ids.py; "
        "each id from the stored token string by the model's tokenizer; no number changed)"
    )
    to_netcdf(new, DEMO)
    print(f"wrote {DEMO}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
