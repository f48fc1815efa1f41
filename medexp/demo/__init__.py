"""Offline demo data: synthetic scans and a small medical-style VQA benchmark built from them."""
