"""Results files as tests compare them: read fully, the attributes of one session dropped."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

#: Attributes that differ between two runs of one configuration (dates, times, the files
#: a merge read): not the results.
SESSION_ATTRS = ("date_created", "history", "collection_seconds_last_session", "merged_from")


def without_session(path: str | Path) -> xr.Dataset:
    """The results file at ``path``, loaded and closed, without :data:`SESSION_ATTRS`."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    for key in SESSION_ATTRS:
        ds.attrs.pop(key, None)
    return ds
