import numpy as np

from services.embedding.engine.tokenizer import EOS_ID, PAD_ID, E5Tokenizer, TokenBatch


def test_prefix_depends_on_kind(model_dir):
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    query, passage = tok.encode(["서울 맛집"], True)[0], tok.encode(["서울 맛집"], False)[0]
    assert query.ids[0] == 0 and query.ids[-1] == EOS_ID
    assert not np.array_equal(query.ids, passage.ids)
    plain = tok.encode(["query: 서울 맛집"], False)[0]  # the prefix is exactly 'query: '
    assert len(plain.ids) > len(query.ids)


def test_long_text_is_cut_to_limit_keeping_eos(model_dir):
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    long = "한국어 문장을 아주 길게 반복합니다. " * 200
    enc = tok.encode([long], False)[0]
    assert len(enc.ids) == 512 and enc.ids[-1] == EOS_ID
    assert enc.truncated and enc.full_length > 512
    short = tok.encode(["짧은 문장"], False)[0]
    assert not short.truncated


def test_batch_pads_right_with_mask():
    from services.embedding.engine.tokenizer import EncodedText

    a = EncodedText(np.array([0, 5, 2]), 3)
    b = EncodedText(np.array([0, 5, 6, 7, 2]), 5)
    batch = TokenBatch.pad([a, b])
    assert batch.input_ids.shape == (2, 5)
    assert list(batch.input_ids[0]) == [0, 5, 2, PAD_ID, PAD_ID]
    assert list(batch.attention_mask[0]) == [1, 1, 1, 0, 0]
    assert batch.input_ids.dtype == np.int64
