"""medexp: config-driven contamination audits of medical vision-language models.

Importing the package imports nothing else: :mod:`medexp.config` registers the config schemas and
resolvers with Hydra when it is first imported, which every entry point and
:func:`medexp.config.compose` does. Heavy libraries (torch, transformers, mlflow) are imported
lazily by the code that needs them.
"""

__version__ = "0.2.0"
