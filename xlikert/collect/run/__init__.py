"""The run machinery: how :func:`~xlikert.collect.collect` turns a prompts Dataset into results.

It reads the contracts of :mod:`xlikert.collect` (the backend protocol, the run's
options, the per-unit record) and drives the backends through them; no backend
imports it.

====================  =================================================================
:mod:`.runner`        ``collect()``: check the call, plan the units, key the cells, run
:mod:`.checked`       the call checked once (:class:`~.checked.CheckedRun`): what every step reads
:mod:`.session`       one run: find reusable cells, compute the rest, assemble the file
:mod:`.identity`      a cell's key: what determines its numbers
:mod:`.reuse`         cells found in earlier results or saved progress, copied
:mod:`.store`         ``<out>.partial/``: the saved units of an interrupted run
:mod:`.lock`          one run per output (``flock``)
:mod:`.interrupt`     SIGTERM and SIGINT: stop after the unit in flight, progress kept
:mod:`.merge`         ``--shard i/n`` parts -> the file one run makes
:mod:`.executor`      where the units are computed: in this process (the default)
:mod:`.cluster`       ... or by model replicas on a Ray cluster (``--ray``)
:mod:`.cost`          ``xlikert plan``: the cost before the run, what a run spent
====================  =================================================================
"""
