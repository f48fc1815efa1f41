"""medexp: config-driven contamination audits of medical vision-language models.

Importing the package registers medexp's structured-config schemas and resolvers with Hydra,
so Hydra's compose API works on ``conf/`` right after ``import medexp``. Heavy libraries
(torch, transformers, mlflow) are imported lazily by the code that needs them.
"""

from medexp.config import quiet_launcher_schema_warning, register_resolvers, register_schemas
from medexp.benchmarks import load_benchmark  # noqa: F401  (public API; imports its loaders lazily)

__version__ = "0.2.0"

register_schemas()
register_resolvers()
quiet_launcher_schema_warning()
