"""PLACEHOLDER: being written; replace this whole file."""

def consensus(*args, **kwargs):
    raise NotImplementedError('consensus.consensus is not written yet')


def dissension(*args, **kwargs):
    raise NotImplementedError('consensus.dissension is not written yet')


def entropy(*args, **kwargs):
    raise NotImplementedError('consensus.entropy is not written yet')


def tastle_consensus(*args, **kwargs):
    raise NotImplementedError('consensus.tastle_consensus is not written yet')


