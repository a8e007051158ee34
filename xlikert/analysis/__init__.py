"""The analysis stages, one module each, in the order of the pipeline::

    constraint -> consensus -> construct -> reliability -> human alignment -> cost

========================  ====================================================================
:mod:`.constraint`        failure rate and renormalised item PMFs (paper section "Constraint")
:mod:`.keying`            reverse keys and subscales: how the instrument enters the analysis
:mod:`.consensus`         Tastle and Multivariate Consensus (certified bounds), entropy
:mod:`.construct`         composites by convolution, mixtures, the distributional ANOVA,
                          contrasts, trends, summaries
:mod:`.reliability`       exact Cronbach's alpha and McDonald's omega over conditions
:mod:`.human`             human respondents' PMFs from survey tables
:mod:`.alignment`         model against humans: W1, TV, JS, representativeness, noise ceiling
:mod:`.cost`              what a sampling study would have paid: SEs, sign flips
:mod:`.decoding`          the bias of sampling at a temperature and top-p
:mod:`.traces`            Monte Carlo error of reasoning-mode PMFs over their traces
========================  ====================================================================

Every function is also at the top of the package (``xl.composite``,
``xl.decompose``, ...); ``xl.sampling`` is :mod:`.cost`.
"""
