"""Image side of the audit: embedders, the float16 embedding store, nearest-neighbour search
and adjudication panels used by Detector 1 (``image_nn``). faiss, open_clip and torch are
imported only inside the functions that need them."""

from medexp.images.embedders import OpenClipEmbedder, PerceptualHash, load_embedder
from medexp.images.search import ApproximateSearch, ExactSearch, build_searcher, nearest, recall_at_1
from medexp.images.store import EmbeddingSet, embed_images

__all__ = [
    "ApproximateSearch",
    "EmbeddingSet",
    "ExactSearch",
    "OpenClipEmbedder",
    "PerceptualHash",
    "build_searcher",
    "embed_images",
    "load_embedder",
    "nearest",
    "recall_at_1",
]
