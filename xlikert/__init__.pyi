"""The names of ``import xlikert as xl``, for type checkers and editors.

Generated from the one list of the public API, :data:`xlikert.api.API`, by
``python -c "from xlikert import api; api.write_stub()"``; do not edit.
"""

from xlikert import accessor as accessor
from xlikert import analysis as analysis
from xlikert import api as api
from xlikert import collect as collect
from xlikert import datasets as datasets
from xlikert import design as design
from xlikert import plot as plot
from xlikert import report as report
from xlikert._version import __version__ as __version__
from xlikert.analysis import sampling as sampling
from xlikert.analysis.alignment.estimate import alignment as alignment
from xlikert.analysis.alignment.estimate import noise_ceiling as noise_ceiling
from xlikert.analysis.alignment.metrics import jensen_shannon as jensen_shannon
from xlikert.analysis.alignment.metrics import mean_difference as mean_difference
from xlikert.analysis.alignment.metrics import representativeness as representativeness
from xlikert.analysis.alignment.metrics import total_variation as total_variation
from xlikert.analysis.alignment.metrics import wasserstein as wasserstein
from xlikert.analysis.alignment.population import silicon_population as silicon_population
from xlikert.analysis.consensus.disagreement import dissension as dissension
from xlikert.analysis.consensus.disagreement import dissension_bounds as dissension_bounds
from xlikert.analysis.consensus.multivariate import consensus as consensus
from xlikert.analysis.consensus.multivariate import consensus_bounds as consensus_bounds
from xlikert.analysis.consensus.shannon import entropy as entropy
from xlikert.analysis.consensus.tastle import tastle_consensus as tastle_consensus
from xlikert.analysis.constraint import failure_rate as failure_rate
from xlikert.analysis.constraint import item_pmf_from_tokens as item_pmf_from_tokens
from xlikert.analysis.constraint import nonsubstantive_rate as nonsubstantive_rate
from xlikert.analysis.constraint import renormalize as renormalize
from xlikert.analysis.construct.composite import composite as composite
from xlikert.analysis.construct.composite import subscale_composites as subscale_composites
from xlikert.analysis.construct.effects import comonotone_contrast as comonotone_contrast
from xlikert.analysis.construct.effects import contrast as contrast
from xlikert.analysis.construct.effects import decompose as decompose
from xlikert.analysis.construct.mixture import grand_mixture as grand_mixture
from xlikert.analysis.construct.mixture import marginal_slice as marginal_slice
from xlikert.analysis.construct.summary import summarize as summarize
from xlikert.analysis.construct.tables import summary_table as summary_table
from xlikert.analysis.construct.trend import trend as trend
from xlikert.analysis.elicitation import elicitation_validity as elicitation_validity
from xlikert.analysis.human.counts import human_pmf_from_counts as human_pmf_from_counts
from xlikert.analysis.human.marginal import human_marginal as human_marginal
from xlikert.analysis.human.survey import human_composite as human_composite
from xlikert.analysis.human.survey import human_pmf as human_pmf
from xlikert.analysis.keying import reflect_reverse_keyed as reflect_reverse_keyed
from xlikert.analysis.reliability.population import reliability as reliability
from xlikert.analysis.support import item_points as item_points
from xlikert.analysis.support import item_support as item_support
from xlikert.analysis.support import nominal_items as nominal_items
from xlikert.analysis.traces import trace_se as trace_se
from xlikert.analysis.validity.compare import validity as validity
from xlikert.core.errors import CollectionError as CollectionError
from xlikert.core.errors import ConfigError as ConfigError
from xlikert.core.errors import DesignError as DesignError
from xlikert.core.errors import InvalidPMFError as InvalidPMFError
from xlikert.core.errors import XlikertError as XlikertError
from xlikert.core.io import open_decomposition as open_decomposition
from xlikert.core.io import open_results as open_results
from xlikert.core.io import to_netcdf as to_netcdf

__all__ = [
    "CollectionError",
    "ConfigError",
    "DesignError",
    "InvalidPMFError",
    "XlikertError",
    "__version__",
    "alignment",
    "comonotone_contrast",
    "composite",
    "consensus",
    "consensus_bounds",
    "contrast",
    "decompose",
    "dissension",
    "dissension_bounds",
    "elicitation_validity",
    "entropy",
    "failure_rate",
    "grand_mixture",
    "human_composite",
    "human_marginal",
    "human_pmf",
    "human_pmf_from_counts",
    "item_pmf_from_tokens",
    "item_points",
    "item_support",
    "jensen_shannon",
    "marginal_slice",
    "mean_difference",
    "noise_ceiling",
    "nominal_items",
    "nonsubstantive_rate",
    "open_decomposition",
    "open_results",
    "reflect_reverse_keyed",
    "reliability",
    "renormalize",
    "representativeness",
    "silicon_population",
    "subscale_composites",
    "summarize",
    "summary_table",
    "tastle_consensus",
    "to_netcdf",
    "total_variation",
    "trace_se",
    "trend",
    "validity",
    "wasserstein",
]
