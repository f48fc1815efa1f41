"""Answering probes: response tables from white-box, generative and black-box models.

- :mod:`medexp.answers.prompt`: the one prompt wording (text and chat messages) of every arm;
- :mod:`medexp.answers.parse`: the strict letter parser, free-text normalisation and matching;
- :mod:`medexp.answers.judges`: the judge stage, what each reply means (``judge=read``, ``exact``, ...);
- :mod:`medexp.answers.openai_client`: black-box answers from an OpenAI-compatible chat API;
- :mod:`medexp.answers.imported`: answers produced elsewhere, imported from a JSONL file;
- :mod:`medexp.answers.table`: the response-table contract (statuses, error causes);
- :mod:`medexp.answers.coverage`: answer counts and the ``answer.min_answered`` gate.
"""

from medexp.answers.coverage import TooFewAnswers, answer_metrics, require_answered
from medexp.answers.imported import RELEASE_ID_KEY, import_model_responses, import_responses, responses_digest
from medexp.answers.openai_client import AnswerError, ChatClient, EndpointUnusable, answer_probes
from medexp.answers.parse import exact_match, normalise_answer, parse_letter, rouge_l
from medexp.answers.prompt import image_data_url, render_messages, render_prompt
from medexp.answers.table import (
    JUDGED_COLUMNS,
    RESPONSE_COLUMNS,
    ErrorCause,
    Status,
    check_judged_table,
    check_response_table,
    error_row,
    response_row,
    response_table,
)

__all__ = [
    "RELEASE_ID_KEY",
    "JUDGED_COLUMNS",
    "RESPONSE_COLUMNS",
    "AnswerError",
    "ChatClient",
    "EndpointUnusable",
    "ErrorCause",
    "Status",
    "TooFewAnswers",
    "answer_metrics",
    "answer_probes",
    "check_judged_table",
    "check_response_table",
    "error_row",
    "exact_match",
    "image_data_url",
    "import_model_responses",
    "import_responses",
    "normalise_answer",
    "parse_letter",
    "render_messages",
    "render_prompt",
    "require_answered",
    "response_row",
    "response_table",
    "responses_digest",
    "rouge_l",
]
