"""Differential training of model pairs (``python -m medexp.train``): a candidate on train +
canaries and an independent model on train only, from one saved initial state, with full
fine-tuning, LoRA (peft) or DP-SGD with LoRA (opacus); saved with ``save_pretrained`` and
named by model configs (``source: trained``), so a cell audits them like any other model."""
