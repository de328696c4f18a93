"""A résumé or a job posting cut to the sections a task reads, by code (issue 63: shorter prompts).

Seed 001 sends whole résumés (2,380 input tokens a chat turn). A task that reads skills and
experience does not need the applicant's address, family, military service or hobbies, nor a
posting's company history, benefits and hiring procedure. A task file declares, per input, which
cut applies (``sections: {resume: resume, posting: posting}``); the reasoning service applies it
before the prompt is rendered; code after the model (a task's ``post``) still sees the whole input.

How a section is found: a line is a heading when it is short, is not a sentence, and is either
decorated (``[경력]``, ``■ 보유 기술``, ``## Skills``, ``1. 학력``, ``자격 요건:``) or names a section
this module knows. A section runs to the next heading. Only sections whose heading names something
the cut leaves out are dropped: text before the first heading and sections under unknown headings
are kept, a heading is dropped only when it is mostly the name of a left-out section
("복지 포인트 플랫폼 개발" under a decoration is a duty, not a benefits section), and a text with
fewer than two headings is kept whole (no structure to trust). What is dropped is therefore only
ever a section the task does not read, whatever the document's layout.
"""

from __future__ import annotations

import re

# Headings of sections, by what they hold. A heading is matched by search, so "경력 사항" and "주요 경력" both match.
PERSONAL = r"인적\s*사항|개인\s*정보|신상|연락처|주소|가족|병역|군\s*복무|contact|personal"
NARRATIVE = (r"자기\s*소개|성장\s*과정|성격|장\s*+[·ㆍ.]?\s*+단점|지원\s*동기|입사\s*후|포부|취미|특기"
             r"|생활\s*신조|좌우명|about\s*me|hobbies")
POSTING_EXTRA = (r"회사\s*소개|기업\s*소개|about\s*us|복리\s*후생|복지|혜택|채용\s*절차|전형|제출\s*서류|접수"
                 r"|지원\s*방법|근무\s*(?:조건|지|시간|형태|환경)|급여|연봉|처우|유의\s*사항|참고\s*사항|문의|benefits")
READ = (r"경력|경험|프로젝트|기술|스킬|역량|보유|자격|학력|교육|수상|활동|요약|업무|담당|우대|요건|직무|모집|skills?"
        r"|experience|projects?|education|summary|qualifications|requirements|responsibilities")

CUTS: dict[str, re.Pattern] = {
    # the facts a résumé's reader weighs: experience, skills, projects, education, certificates
    "resume": re.compile(f"{PERSONAL}|{NARRATIVE}", re.IGNORECASE),
    # everything but the applicant's personal data (an interviewer reads the narratives too)
    "resume_personal": re.compile(PERSONAL, re.IGNORECASE),
    # what the job is and asks for: duties, requirements, preferences
    "posting": re.compile(POSTING_EXTRA, re.IGNORECASE),
}
KNOWN = re.compile(f"{PERSONAL}|{NARRATIVE}|{POSTING_EXTRA}|{READ}", re.IGNORECASE)
DECORATED = re.compile(r"^(?:#{1,6}\s*|[■□▶▷◆◇◎●○★☆]\s*|\d{1,2}[.)]\s+|[\[【〈<「『]\s*)")
BRACKETS = "[]【】〈〉<>「」『』#■□▶▷◆◇◎●○★☆:："
SENTENCE_END = re.compile(r"(?:다|요|니다|음|함|됨|[.!?])$")
MAX_HEADING = 30
PLAIN_SLACK = 4  # other characters an undecorated heading may have beside the section's word ("주요 경력 사항")
DROP_SLACK = 6  # … and a heading whose section is dropped ("전형 절차 및 일정")


def heading(line: str) -> str | None:
    """The heading's name when ``line`` is a section heading, else None."""
    text = line.strip()
    if not text or len(text) > MAX_HEADING + 6:
        return None
    name = re.sub(r"^\d{1,2}[.)]\s+", "", text).strip(BRACKETS + " \t").strip()
    if not name or len(name) > MAX_HEADING or SENTENCE_END.search(name) or "," in name:
        return None
    decorated = bool(DECORATED.match(text)) or text.endswith((":", "："))
    return name if decorated or names(KNOWN, name, PLAIN_SLACK) else None


def names(pattern: re.Pattern, name: str, slack: int) -> bool:
    """Whether ``name`` is mostly what ``pattern`` matches: at most ``slack`` other characters (spaces aside).

    "주요 경력" and "복리후생 및 혜택" are headings of what they name; "복지 포인트 플랫폼 개발", a
    duty in a posting, is not a benefits section.
    """
    if not pattern.search(name):
        return False
    return len(re.sub(r"\s", "", pattern.sub("", name))) <= slack


def cut(text: str, kind: str) -> str:
    """``text`` less the sections cut ``kind`` leaves out (:data:`CUTS`); whole when it has < 2 headings."""
    drop = CUTS[kind]
    lines = text.splitlines()
    heads = [(i, name) for i, line in enumerate(lines) if (name := heading(line)) is not None]
    if len(heads) < 2:
        return text
    keep = lines[:heads[0][0]]
    for n, (start, name) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        if not names(drop, name, DROP_SLACK):
            keep += lines[start:end]
    out = "\n".join(keep).strip()
    return out or text
