"""Tiny random-weight Marian checkpoints in the upstream file layout (config.json, weights,
source.spm, target.spm, vocab.json, tokenizer_config.json), with SentencePiece models trained on
the fly, so the Marian translator's real loading and decoding path runs offline."""

from __future__ import annotations

import json
from pathlib import Path

ENGLISH = [
    "Is there a lesion in the liver on this CT?",
    "Which organ is shown on this MRI?",
    "How many nodules are visible in the lung?",
    "The kidney looks normal on this ultrasound.",
    "Where is the mass located within the brain?",
    "Does the heart look healthy on this X-Ray?",
]
CHINESE = [
    "这张CT上肝脏有病变吗？",
    "这张核磁共振显示的是哪个器官？",
    "肺部可见多少个结节？",
    "这张超声上肾脏看起来正常。",
    "肿块位于大脑的哪个位置？",
    "这张X光片上心脏看起来健康吗？",
]
LANGUAGE_TOKEN = ">>cmn_Hans<<"
SPECIALS = ["</s>", "<unk>", LANGUAGE_TOKEN, "<pad>"]  # Marian's eos 0, unk 1, a language code, pad


def _sentencepiece(lines: list[str], prefix: Path) -> Path:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 20), model_prefix=str(prefix), vocab_size=60, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1, minloglevel=2)
    return prefix.with_suffix(".model")


def _pieces(model: Path) -> list[str]:
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=str(model))
    return [processor.id_to_piece(index) for index in range(processor.get_piece_size())]


def build_pair(root: Path, seed: int = 0) -> tuple[Path, Path]:
    """``(en->zh, zh->en)`` checkpoint folders under ``root``; the en->zh vocabulary knows
    ``>>cmn_Hans<<`` (a multilingual target side), the zh->en one has no language code."""
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    root.mkdir(parents=True, exist_ok=True)
    english, chinese = _sentencepiece(ENGLISH, root / "en"), _sentencepiece(CHINESE, root / "zh")
    folders = []
    for name, source, target, codes in (("en-zh", english, chinese, True), ("zh-en", chinese, english, False)):
        vocab = {token: index for index, token in enumerate(t for t in SPECIALS if codes or t != LANGUAGE_TOKEN)}
        for piece in _pieces(english) + _pieces(chinese):
            vocab.setdefault(piece, len(vocab))
        vocab_file = root / f"vocab-{name}.json"
        vocab_file.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        folder = root / name
        tokenizer = MarianTokenizer(str(source), str(target), str(vocab_file), source_lang=name[:2],
                                    target_lang=name[3:])
        tokenizer.save_pretrained(folder)
        torch.manual_seed(seed + len(folders))
        config = MarianConfig(
            vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
            pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"], decoder_start_token_id=vocab["<pad>"],
            forced_eos_token_id=vocab["</s>"])
        MarianMTModel(config).save_pretrained(folder)
        folders.append(folder)
    return folders[0], folders[1]
