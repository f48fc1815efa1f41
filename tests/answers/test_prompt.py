"""One prompt wording: arms differ only in their probes; chat messages carry the image faithfully."""

from __future__ import annotations

import base64
import dataclasses

import numpy as np
import pytest
from PIL import Image

from medexp.answers.prompt import image_data_url, render_messages, render_prompt
from medexp.config.schemas import AnswerConfig
from tests.answers.conftest import OPTIONS, choice_probe, text_probe, write_png


def test_default_layout(answer_cfg):
    prompt = render_prompt(choice_probe(), answer_cfg)
    assert prompt == ("What does the radiograph show?\nOptions:\nA. Pneumonia\nB. Pleural effusion\n"
                      "C. Normal chest\nD. Cardiomegaly\nAnswer with the option's letter only.")


def test_two_arms_differing_in_option_order_differ_only_in_the_option_lines(tmp_path):
    cfg = AnswerConfig(system_prompt="You are a radiologist.")
    image = write_png(tmp_path / "scan.png")
    original = choice_probe(gold="B", image=image)
    shuffled = choice_probe(kind="option_shuffle", options=(OPTIONS[2], OPTIONS[0], OPTIONS[3], OPTIONS[1]), gold="D",
                            image=image)
    first, second = render_prompt(original, cfg).split("\n"), render_prompt(shuffled, cfg).split("\n")
    option_rows = {2, 3, 4, 5}
    assert len(first) == len(second) == 7
    assert {index for index, (a, b) in enumerate(zip(first, second)) if a != b} == option_rows
    assert [line for index, line in enumerate(first) if index not in option_rows] == \
        [line for index, line in enumerate(second) if index not in option_rows]
    assert sorted(first[index][3:] for index in option_rows) == sorted(second[index][3:] for index in option_rows)
    # the chat form: same turns, same image part; only the text part differs
    one, two = render_messages(original, cfg), render_messages(shuffled, cfg)
    assert one[0] == two[0] and one[1]["content"][0] == two[1]["content"][0]
    assert one[1]["content"][1]["text"] == "\n".join(first) and two[1]["content"][1]["text"] == "\n".join(second)


def test_free_text_template_and_letters_field():
    cfg = AnswerConfig(choice_template="{question} ({letters})\n{options}", free_text_template="Q: {question}\nA:")
    assert render_prompt(choice_probe(options=("yes", "no"), gold="A"), cfg) == \
        "What does the radiograph show? (A, B)\nA. yes\nB. no"
    assert render_prompt(text_probe(question="Name it."), cfg) == "Q: Name it.\nA:"


def test_braces_in_a_question_are_text_not_template_fields(answer_cfg):
    probe = choice_probe(question="Is {x} > 3 in the {image}?", options=("{yes}", "no"), gold="A")
    assert render_prompt(probe, answer_cfg).startswith("Is {x} > 3 in the {image}?\nOptions:\nA. {yes}\nB. no")


def test_messages_system_turn_text_only_and_image(tmp_path):
    cfg = AnswerConfig(system_prompt="You are a radiologist.")
    text_only = render_messages(choice_probe(), cfg)
    assert text_only == [{"role": "system", "content": "You are a radiologist."},
                         {"role": "user", "content": render_prompt(choice_probe(), cfg)}]
    image = write_png(tmp_path / "scan.png")
    with_image = render_messages(choice_probe(image=image), AnswerConfig())
    assert [message["role"] for message in with_image] == ["user"]  # no system turn unless configured
    image_part, text_part = with_image[0]["content"]
    assert text_part == {"type": "text", "text": render_prompt(choice_probe(), cfg)}
    url = image_part["image_url"]["url"]
    assert image_part["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == image.read_bytes()


def test_jpeg_is_sent_as_is_and_bmp_is_reencoded_losslessly(tmp_path):
    pixels = np.random.default_rng(1).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "scan.jpg")
    url = image_data_url(tmp_path / "scan.jpg")
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == (tmp_path / "scan.jpg").read_bytes()
    Image.fromarray(pixels).save(tmp_path / "scan.bmp")
    url = image_data_url(tmp_path / "scan.bmp")
    assert url.startswith("data:image/png;base64,")
    import io

    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert np.array_equal(decoded, pixels)


def test_a_file_that_is_no_image_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match="notes.txt: not an image"):
        image_data_url(tmp_path / "notes.txt")


def test_config_is_the_only_source_of_wording(answer_cfg):
    changed = dataclasses.replace(answer_cfg, option_line="({letter}) {text}")
    assert "(B) Pleural effusion" in render_prompt(choice_probe(), changed)
    assert "B. Pleural effusion" in render_prompt(choice_probe(), answer_cfg)
