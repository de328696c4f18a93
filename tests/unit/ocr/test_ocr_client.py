"""The OCR client's request options: a domain type, turned into the contract's message only in the client."""

from __future__ import annotations

from clients.ocr import Options


def test_default_options_leave_every_service_default_on():
    message = Options().to_proto()
    assert (message.languages, message.disable_fallback, message.disable_deskew) == ("", False, False)


def test_options_map_to_the_contracts_disable_flags():
    message = Options(languages="kor", fallback=False, deskew=False).to_proto()
    assert (message.languages, message.disable_fallback, message.disable_deskew) == ("kor", True, True)
