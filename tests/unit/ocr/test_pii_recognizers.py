"""Personal data in Korean text: each recognizer, distractors that must not fire, OCR confusions, masking."""

import pytest

from services.ocr.pii.detector import Policy, detect, mask
from services.ocr.pii.recognizers import luhn, rrn_checksum

RESUME = """성명: 홍길동
생년월일: 1990.01.15
주민등록번호: 900115-1234568
휴대폰: 010-1234-5678 / 자택 02)345-6789
이메일: gildong.hong@example.com, 깃허브 https://github.com/gdhong, 인스타 @gd_hong
주소: 서울특별시 강남구 테헤란로 123, 4층
급여 계좌: 국민은행 123456-01-234567
여권번호 M12345678, 운전면허 11-12-345678-90
카드 4111-1111-1111-1111
외국인등록번호 850304-5123457
김민수 드림"""


def found(text, **policy):
    return {(s.kind, text[s.start:s.end]) for s in detect(text, Policy(**policy) if policy else None)}


def test_every_kind_on_a_resume():
    got = found(RESUME)
    assert got == {
        ("person", "홍길동"), ("birth_date", "1990.01.15"), ("resident_number", "900115-1234568"),
        ("phone", "010-1234-5678"), ("phone", "02)345-6789"), ("email", "gildong.hong@example.com"),
        ("url", "https://github.com/gdhong"), ("handle", "@gd_hong"),
        ("address", "서울특별시 강남구 테헤란로 123, 4층"),
        ("bank_account", "123456-01-234567"), ("passport", "M12345678"), ("driver_license", "11-12-345678-90"),
        ("card", "4111-1111-1111-1111"), ("alien_number", "850304-5123457"), ("person", "김민수")}


@pytest.mark.parametrize("distractor", [
    "사업자등록번호 123-45-67890", "회사 대표번호 1588-1234", "대표전화 02-555-1234", "팩스 031-555-1234",
    "우편번호 06234", "재직 기간 2019.03 ~ 2021.08", "희망 연봉 5,000만 원", "TOEIC 900점", "Spring Boot 3.2.1",
    "주문번호 20261205-1234567", "제품 코드 SKU-2024-00123", "작성일 2026.12.05",
    "고객님 안녕하세요. 선생님께 감사드립니다.",
    "운송장 123456789012", "조언해 주세요, 천천히 만들어 볼게요",
])
def test_distractors_do_not_fire(distractor):
    assert found(distractor) == set()


def test_ocr_confusions_do_not_hide_a_number():
    assert found("휴대폰 O1O-1234-5678") == {("phone", "O1O-1234-5678")}
    assert found("주민등록번호 9OO115–1234568") == {("resident_number", "9OO115–1234568")}
    assert found("연락처 010 -1234 -5678") == {("phone", "010 -1234 -5678")}
    assert found("+82 10-1234-5678로 연락") == {("phone", "+82 10-1234-5678")}


def test_resident_number_scores_say_what_was_checked():
    from stdnum.kr import rrn  # the reference implementation agrees with ours

    (checked,) = detect("900115-1234567")
    (post_2020,) = detect("900115-1234568")
    assert rrn_checksum("9001151234567") and not rrn_checksum("9001151234568")
    assert rrn.is_valid("9001151234567") and not rrn.is_valid("9001151234568")
    assert checked.score == 0.95 and checked.rule == "rrn:date+checksum"
    assert post_2020.score == 0.75 and post_2020.rule == "rrn:date,no-checksum", "issued since 2020: no checksum"
    assert detect("901315-1234567") == [], "no such date, no context: not a resident number"


def test_cards_need_luhn_or_context_and_accounts_need_their_bank():
    assert luhn("4111111111111111") and not luhn("4111111111111112")
    assert found("4111-1111-1111-1112") == set()
    assert found("카드 4111-1111-1111-1112") == {("card", "4111-1111-1111-1112")}
    assert found("번호 123456-01-234567") == set()
    assert found("신한은행 110-123-456789 (예금주 홍길동)") >= {("bank_account", "110-123-456789")}


def test_kinds_and_company_lines_follow_the_policy():
    assert found(RESUME, kinds=("email",)) == {("email", "gildong.hong@example.com")}
    assert ("phone", "02-555-1234") in found("대표전화 02-555-1234", company_lines=True)


def test_masking_hides_every_span_and_keep_shows_what_recognises_it():
    spans = detect(RESUME)
    full = mask(RESUME, spans)
    for secret in ("홍길동", "900115-1234568", "010-1234-5678", "gildong.hong", "테헤란로 123", "4111-1111"):
        assert secret not in full
    partial = mask(RESUME, spans, keep=True)
    assert "900115-1******" in partial and "010-****-****" in partial and "홍**" in partial
    assert "g***********@example.com" in partial


def test_a_name_as_the_first_field_of_a_contact_line_is_found():
    """Issue 77: 20 of 60 held-out résumés wrote the name first on a separated contact line; none was found."""
    from services.ocr.pii.detector import detect

    for line, name in (("김주원  |  010.5856.8366  |  kim.81@example.com", "김주원"),
                       ("이서연 · 010-1234-5678 · seoyeon@mail.kr", "이서연"),
                       ("박지훈 / 010 2222 3333 / github.com/jihoon", "박지훈"),
                       ("최민준    choi@ex.co.kr    010-5555-1234", "최민준"),
                       ("정하늘 (鄭하늘) | 010-3333-4444", "정하늘"),
                       ("남궁민 010-7777-8888 namgung@ex.com", "남궁민")):
        text = line + "\n백엔드 개발자\n경력사항\n- 결제 시스템 개발"
        names = [text[s.start:s.end] for s in detect(text) if s.kind == "person"]
        assert names == [name], (line, names)
    for line in ("연락처 | 010-1111-2222", "서울 | 010-1111-2222", "카카오 | 2021.03 - 2023.08",
                 "김장 봉사 | 2022.11", "정보보안  |  보안 교육 이수"):  # no name, or no contact field after it
        assert not [s for s in detect(line) if s.kind == "person"], line
