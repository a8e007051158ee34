"""PLACEHOLDER: being written; replace this whole file."""

def open_decomposition(*args, **kwargs):
    raise NotImplementedError('io.open_decomposition is not written yet')


def open_results(*args, **kwargs):
    raise NotImplementedError('io.open_results is not written yet')


def to_netcdf(*args, **kwargs):
    raise NotImplementedError('io.to_netcdf is not written yet')


