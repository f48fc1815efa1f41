"""Answering probes: response tables from white-box, generative and black-box models."""

from medexp.answers.table import RESPONSE_COLUMNS, Status, check_response_table, response_row

__all__ = ["RESPONSE_COLUMNS", "Status", "check_response_table", "response_row"]
