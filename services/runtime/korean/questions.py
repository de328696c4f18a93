"""Whether a message asks for information, read from how its sentences end (grammar, not topic words).

A sentence asks when it ends with a question mark, or with an interrogative ending (…나요, …까요,
…ㄹ까, …인가요, …냐, …는지요), or when the message requests information with a verb of telling
(알려 줘, 가르쳐 주세요, 설명해 줘, 궁금해요). A statement (…네요, …어요, …습니다) or a request
to act (등록해 줘, 봐 주세요), even phrased as a question (…해 줄래요?, …해 줄 수 있어?), does not
ask. Used by the assistant: a question answered without
searching is an answer no code has checked.
"""

from __future__ import annotations

import re

SENTENCES = re.compile(r"(?<=[.!?？。])\s+|\n+")
TRAILING = " .!~^ㅎㅋㅠㅜ;)"
ENDING = re.compile(r"(?:나요|까요|[을를할될갈볼줄올]까|[인은는한된운던]가요?|[이]?냐|는지요|은지요|[인]지요)$")
# "…해 줄래요?", "…해 줄 수 있어?", "…해 주시겠어요?": a request to act phrased as a question.
REQUEST = re.compile(r"(?:줄래|주실래|줄 ?수 ?있|주실 ?수 ?있|주시겠|줘|주세요)[가-힣]{0,3}$")
# "알려줘서 고마워", "알려 줘도": the verb in a clause of reason or concession (…서, …도) is not a request.
# "자기계발비 얼마 줘?", "몇 개 줘?": 주다 as the main verb after a wh-word (what is given), not the
# auxiliary of a request to act (찾아 줘, 등록해 줘: a verb in -아/-어 before it).
WH_GIVE = re.compile(r"(?:얼마|몇|며칠|뭐|무엇|무슨|언제|어디|누가|누구|어떤|어느)[가-힣]*"
                     r"(?:\s+[가-힣]*[^가-힣\s아어여워와봐해려춰줘])?\s?(?:줘|줘요|주나요|주나|주니|주세요)$")
TELLING = re.compile(r"(?:알려|가르쳐|설명해)\s?(?:줘(?![서도])|주세요|줄래|주실|주시겠|줄 수)"
                     r"|궁금(?:해|합니다|하네|한데)")


def asks(text: str) -> bool:
    """True when the message asks for information (see the module doc)."""
    for sentence in SENTENCES.split(text.strip()):
        s = sentence.strip()
        bare = s.rstrip(TRAILING + "?？")
        if s.endswith(("?", "？")) and (not REQUEST.search(bare) or WH_GIVE.search(bare)):
            return True
        if ENDING.search(s.rstrip(TRAILING)):
            return True
    return bool(TELLING.search(text))


def acts(text: str) -> bool:
    """True when the message's last sentence asks for an action (…해 줘, …주세요, …줄래?) and nothing is asked."""
    sentences = [x.strip() for x in SENTENCES.split(text.strip()) if x.strip()]
    return bool(sentences) and bool(REQUEST.search(sentences[-1].rstrip(TRAILING + "?？"))) and not asks(text)
