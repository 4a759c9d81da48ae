"""Hybrid retrieval over the incident cards: BM25 + dense (chromadb) + log signatures.

Modules: `tokenize` (pure), `sparse` (BM25), `dense` (embedders), `index` (chromadb build,
content hash), `fusion` (weighted RRF, pure), `search` (the public `search()`).
"""
