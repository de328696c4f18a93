"""Who a gift is for and what it marks: the closed classes of kin and role words and of occasions.

Read by the gift conversations (gateway/conversations/slots.py: the recipient and occasion slots) and
by the reasons' rule-written fallback (services/reasoning/fallback.py: the query's facets). Kin and
occasion words are a closed class of the language, unlike refusals or wishes, which are read by
grammar; a word one syllable longer is still read (여동생 through 동생, see the profile's ``_listed``).
"""

from __future__ import annotations

import re

RECIPIENTS = ("아내", "와이프", "남편", "어머니", "엄마", "아버지", "아빠", "부모님", "시부모님", "장인어른", "장모님",
              "여자친구", "여친", "남자친구", "남친", "친구", "동료", "팀장님", "상사", "선배", "후배", "조카", "아이",
              "아기", "딸", "아들", "선생님", "할머니", "할아버지", "동생", "언니", "오빠", "누나", "고객",
              *"이모 고모 삼촌 외삼촌 이모부 고모부 사촌 형부 매형 처제 처형 며느리 사위 손녀 손자 외할머니 외할아버지 "
               "시어머니 시아버지 장인 조카딸 교수님 은사님 원장님 사장님 대표님 부장님 과장님 팀원 동기 이웃 "
               "형 형님 처남 매제 제부 올케 시누이 형수 아주버님 도련님 손주".split())
OCCASIONS = ("생일", "생신", "결혼기념일", "기념일", "집들이", "개업", "승진", "퇴사", "이직", "출산", "졸업",
             "입학", "취업", "합격", "크리스마스", "어버이날", "스승의 날", "발렌타인데이", "화이트데이", "설날",
             "추석", "명절", "100일", "결혼", "환갑", "칠순", "성년의 날",
             *"연말 송년 신년 새해 퇴직 은퇴 전역 제대 백일 약혼 임신 결혼식 팔순 고희 어린이날 "
              "수능 입사 회갑 돌 돌잔치 첫돌 백일잔치 병문안 문병 퇴원 이사 개업식 개원 생일파티 상견례".split())


def facets(text: str) -> tuple[list[str], list[str]]:
    """The recipients and occasions ``text`` names, in the order written (여동생 read through 동생, kept whole)."""
    who = sorted({m.group(0) for w in RECIPIENTS for m in re.finditer(rf"(?<![가-힣])[가-힣]?{re.escape(w)}", text)
                  if m.group(0) == w or m.group(0)[1:] == w},
                 key=lambda w: (text.find(w), -len(w)))
    who = [w for w in who if not any(w != o and w in o for o in who)]
    why = sorted({w for w in OCCASIONS if len(w) >= 2 and w in text}, key=text.find)
    return who, [w for w in why if not any(w != o and w in o for o in why)]
