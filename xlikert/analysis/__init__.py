"""The analysis stages, one module each, in the order of the pipeline::

    constraint -> consensus -> construct -> reliability -> human alignment -> sampling

========================  ====================================================================
:mod:`.constraint`        failure rate and renormalised item PMFs (paper section "Constraint")
:mod:`.keying`            reverse keys and subscales: how the instrument enters the analysis
:mod:`.support`           each item's own options: its support, number of points, nominal items
:mod:`.consensus`         Tastle and Multivariate Consensus (certified bounds), entropy
:mod:`.construct`         composites by convolution, mixtures, the distributional ANOVA,
                          contrasts, trends, summaries; its tables in ``construct.tables``
:mod:`.reliability`       exact Cronbach's alpha and McDonald's omega over conditions
:mod:`.human`             human respondents' PMFs from survey tables
:mod:`.alignment`         model against humans: W1, TV, JS, representativeness, noise ceiling
:mod:`.nonsubstantive`    "Don't know" and "Refused": human counts, model-minus-human rates
:mod:`.individual`        one respondent at a time: each person's answer scored against the
                          model's exact PMF (log, RPS, Brier, mode), skill over baselines
:mod:`.validity`          which reading of the model (elicitation level) is closest to the
                          people: distances with paired SEs, individual scores per level
:mod:`.ppi`               prediction-powered inference: population means and shares from
                          answered respondents and exact per-person predictions
:mod:`.sampling`          what a sampling study would have paid: SEs, sign flips, decoding
                          bias; its tables in ``sampling.tables`` (``xl.sampling``)
:mod:`.traces`            Monte Carlo error of reasoning-mode PMFs over their traces
:mod:`.frames`            the tidy frames the stages' tables share (one row per level)
========================  ====================================================================

Every analysis function is also at the top of the package (``xl.composite``,
``xl.decompose``, ...); ``xl.sampling`` is :mod:`.sampling`. Each table is built in the
stage it tabulates (``failure_summary`` in :mod:`.constraint`, ``consensus_entropy`` in
:mod:`.consensus`, ``summary_table`` and the paper's effect tables in
:mod:`.construct.tables`, ``reliability_table`` in :mod:`.reliability`,
``alignment_table`` in :mod:`.alignment`, ``human_vs_llm`` in :mod:`.human`, the
sampling-cost tables in :mod:`.sampling.tables`) and rendered by :mod:`xlikert.report.tables`.
"""
