"""PLACEHOLDER: being written; replace this whole file."""

def comonotone_contrast(*args, **kwargs):
    raise NotImplementedError('construct.comonotone_contrast is not written yet')


def composite(*args, **kwargs):
    raise NotImplementedError('construct.composite is not written yet')


def contrast(*args, **kwargs):
    raise NotImplementedError('construct.contrast is not written yet')


def decompose(*args, **kwargs):
    raise NotImplementedError('construct.decompose is not written yet')


def grand_mixture(*args, **kwargs):
    raise NotImplementedError('construct.grand_mixture is not written yet')


def marginal_slice(*args, **kwargs):
    raise NotImplementedError('construct.marginal_slice is not written yet')


def summarize(*args, **kwargs):
    raise NotImplementedError('construct.summarize is not written yet')


def summary_table(*args, **kwargs):
    raise NotImplementedError('construct.summary_table is not written yet')


def trend(*args, **kwargs):
    raise NotImplementedError('construct.trend is not written yet')


