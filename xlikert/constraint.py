"""PLACEHOLDER: being written; replace this whole file."""

def failure_rate(*args, **kwargs):
    raise NotImplementedError('constraint.failure_rate is not written yet')


def item_pmf_from_tokens(*args, **kwargs):
    raise NotImplementedError('constraint.item_pmf_from_tokens is not written yet')


def renormalize(*args, **kwargs):
    raise NotImplementedError('constraint.renormalize is not written yet')


