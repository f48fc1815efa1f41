"""medexp: config-driven contamination audits of medical vision-language models.

Importing the package imports nothing else: the entry points and :func:`medexp.config.compose`
register the config schemas and resolvers with Hydra before they compose. Heavy libraries (torch,
transformers, mlflow) are imported lazily by the code that needs them.
"""

__version__ = "0.2.0"
