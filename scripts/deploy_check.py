"""``make deploy-check``: the mesh image built here, the Kubernetes manifests played as real containers, faults.

    python scripts/deploy_check.py [--quick] [--keep] [--out bench/results]

1. **Prepare** (cached under ``~/.cache/korean-mesh/deploy``): podman, runc and debootstrap from Debian;
   ``containers.conf`` with the rlimits and runtime these machines need; a Debian bookworm minbase by
   debootstrap, imported as ``localhost/mesh-bookworm-minbase`` (no registry is reachable); the Python and
   Redis bases on it (``infra/docker/Containerfile.base``); a wheelhouse of the pinned dependencies.
2. **Build** ``infra/docker/Dockerfile --target runtime-slim`` on that base (the wheelhouse mounted at
   ``/wheels``), cold (``--no-cache``) and warm; the size of each stage. The model files, the compiled
   llama-server and the GGUF come from the host's set-up, **mounted at run time** (hostPath volumes),
   never copied into the image.
3. **Play the manifests**: ``kubectl kustomize infra/k8s/overlays/dev`` turned into what podman 4.3 plays
   on one host (every change is listed in :data:`DIFFERENCES` and in the result), ``podman kube play``;
   each readiness and liveness probe is executed (podman runs none itself: exec probes with
   ``podman exec``, gRPC/HTTP/TCP probes from the host, as a kubelet would); then a collection is
   ingested and a Korean search answers through the gateway container. Start-to-ready per role, p50 of 3
   (``--quick``: 1).
4. **Faults** (not with ``--quick``): the embedding pod stopped during searches (keyword-only, marked,
   dense again when it returns); the retrieval container killed mid-ingest (the job resumes, nothing
   acknowledged lost); Redis (cache) restarted (searches keep answering).
5. Writes ``bench/results/deploy.md`` and ``.json``, then removes every pod, container and image it made
   (the cached minbase archive and wheelhouse stay, so a second run starts from them; ``--keep`` keeps
   the images too).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "korean-mesh"
DEPLOY = CACHE / "deploy"
MINBASE = "localhost/mesh-bookworm-minbase"
PYBASE = "localhost/mesh-python-base"
REDIS = "localhost/mesh-redis"
IMAGE = "localhost/korean-mesh:check"
DEPS_IMAGE = "localhost/korean-mesh:check-deps"
API_KEY = "deploy-check-key"
LLM_ENV = {"LLM_MODEL": "qwen2.5-coder-1.5b-instruct-q4", "LLM_PORT": "8081", "LLM_CTX": "4096",
           "LLM_DRY_MULTIPLIER": "0.8"}
PORTS = {"embedding": 50051, "retrieval": 50052, "reasoning": 50053, "ocr": 50054, "gateway": 8080,
         "redis-cache": 6379, "redis-jobs": 6380, "llm": 8081}
HOSTS = {"embedding:": "127.0.0.1:", "retrieval:": "127.0.0.1:", "ocr:": "127.0.0.1:",
         "reasoning-0.reasoning:": "127.0.0.1:", "redis-cache:6379": "127.0.0.1:6379",
         "redis-jobs:6379": "127.0.0.1:6380"}
DIFFERENCES = [
    "Namespace, Services, NetworkPolicies, PodDisruptionBudgets and HorizontalPodAutoscalers are left out (one "
    "host, no cluster: nothing to schedule, route or scale; they stay validated statically)",
    "every workload (Deployment or StatefulSet) becomes one Pod with its template, on the host network "
    "(podman 4.3 plays Pods and Deployments, not StatefulSets; there is no cluster DNS)",
    "service names in the settings (embedding:50051, redis-jobs:6379, ...) become 127.0.0.1 and the ports "
    "given; redis-jobs listens on 6380 (two Redis on one host network)",
    "the Qdrant StatefulSet is left out (no Qdrant server binary or image here): retrieval uses its embedded "
    "engine (/data/qdrant), without the Qdrant API key volume",
    "volume claims (redis-jobs) and the services' /data are directories of this host owned by the pod's user, "
    "as a PersistentVolume with fsGroup would be (podman applies no fsGroup)",
    "ConfigMap and Secret values are written into each container's env (envFrom resolved by this script)",
    "images: korean-mesh:0.1.0 → localhost/korean-mesh:check (target runtime-slim, built here on a "
    "debootstrapped base); korean-mesh-llm → the same image running `llm`; redis:7.4.2-alpine → "
    "localhost/mesh-redis (Debian's redis-server); imagePullPolicy Never",
    "hostPath volumes: the host's model cache at /opt/models (embedding), the host's llama-server at /opt/llm "
    "and its GGUF at /opt/llm-models (llm)",
    "resources, securityContext's seccomp profile and topology spread are dropped (podman on this host "
    "cannot apply cgroup limits or spread pods); the containers still run as uid 10001",
    "probes are executed by this script (podman 4.3 runs none); containerPorts are dropped (on the host "
    "network every port is the host's; podman refuses port mappings there)",
    "the gateway's API key Secret holds a key made for the check instead of the placeholder keys",
]


def log(msg: str) -> None:
    """One progress line on stderr."""
    print(f"[deploy-check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(*cmd: str, timeout: float = 600, check: bool = True, quiet: bool = True,
       **kw: Any) -> subprocess.CompletedProcess:
    """Run ``cmd``; its output kept (shown when it fails)."""
    proc = subprocess.run(cmd, capture_output=quiet, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        tail = ((proc.stdout or "") + (proc.stderr or ""))[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}:\n{tail}")
    return proc


def dangling() -> list[str]:
    """The ids of the untagged images podman holds."""
    return sh("podman", "images", "-q", "--filter", "dangling=true", check=False).stdout.split()


def image_exists(name: str) -> bool:
    """Whether podman holds ``name``."""
    return sh("podman", "image", "exists", name, check=False).returncode == 0


# -- 1. prepare --------------------------------------------------------------------------------------------

def debian_mirror() -> str:
    """The Debian mirror this host's apt uses (debootstrap needs one)."""
    for path in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if path.exists():
            for line in path.read_text().splitlines():
                words = line.split()
                if line.startswith("URIs:") and len(words) > 1:
                    return words[1]
                if line.startswith("deb ") and len(words) > 1 and "security" not in line:
                    return words[1]
    raise RuntimeError("no Debian mirror found in /etc/apt/sources.list(.d)")


def prepare(figures: dict) -> None:
    """podman, runc, debootstrap, containers.conf, the bases and the wheelhouse."""
    t0 = time.perf_counter()
    if not all(shutil.which(b) for b in ("podman", "runc", "debootstrap")):
        log("installing podman, runc and debootstrap (apt)")
        sh("apt-get", "install", "-y", "podman", "runc", "debootstrap", timeout=600,
           env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    conf = Path("/etc/containers/containers.conf")
    if not conf.exists() or "default_ulimits" not in conf.read_text():
        conf.parent.mkdir(parents=True, exist_ok=True)
        with conf.open("a") as f:  # without them: "error setting rlimit type 7: operation not permitted"
            f.write('\n[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
                    '\n[engine]\nruntime = "runc"\n')
    DEPLOY.mkdir(parents=True, exist_ok=True)
    archive = DEPLOY / "bookworm-minbase.tar"
    if not image_exists(MINBASE):
        if not archive.exists():
            log("debootstrap bookworm minbase (~30 s)")
            with tempfile.TemporaryDirectory(prefix="minbase-") as root:
                sh("debootstrap", "--variant=minbase", "bookworm", root, debian_mirror(), timeout=900)
                tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
                path = "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                sh("podman", "import", "--change", path, "-", MINBASE, stdin=tar.stdout, timeout=600)
                tar.wait()
            sh("podman", "save", "-o", str(archive), MINBASE, timeout=600)
        else:
            sh("podman", "load", "-i", str(archive), timeout=600)
    for target, name in (("python", PYBASE), ("redis", REDIS)):
        if not image_exists(name):
            log(f"building {name}")
            sh("podman", "build", "-f", str(ROOT / "infra/docker/Containerfile.base"), "--target", target,
               "--build-arg", f"BASE_IMAGE={MINBASE}", "-t", name, str(ROOT / "infra/docker"), timeout=900)
    wheels = DEPLOY / "wheels"
    requirements = ROOT / "pyproject.toml"
    stamp = wheels / ".pyproject"
    if not stamp.exists() or stamp.read_text() != requirements.read_text():
        log("filling the wheelhouse (pip download of the pinned dependencies)")
        import tomllib

        deps = tomllib.loads(requirements.read_text())["project"]["dependencies"]
        wheels.mkdir(parents=True, exist_ok=True)
        req = wheels / "requirements.txt"
        req.write_text("\n".join(deps) + "\n")
        sh(sys.executable, "-m", "pip", "download", "-q", "-r", str(req), "-d", str(wheels), timeout=1200)
        # what the base's Python (Debian's 3.11.2) needs beside the host's: redis wants async-timeout below 3.11.3
        sh(sys.executable, "-m", "pip", "download", "-q", "async-timeout>=4.0.3", "-d", str(wheels), timeout=300)
        for sdist in wheels.glob("*.tar.gz"):  # built here, so the image build needs no index and no compiler
            sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(sdist), "-w", str(wheels), timeout=900)
            sdist.unlink()
        stamp.write_text(requirements.read_text())
    figures["prepare_s"] = round(time.perf_counter() - t0, 1)


# -- 2. build ----------------------------------------------------------------------------------------------

def build(figures: dict, *, cold: bool) -> None:
    """The runtime-slim image (and its deps stage, for its size); cold: no layer cache."""
    args = ["podman", "build", "-f", str(ROOT / "infra/docker/Dockerfile"), "--ignorefile",
            str(ROOT / "infra/docker/Dockerfile.dockerignore"), "--build-arg", f"PYTHON_IMAGE={PYBASE}",
            "-v", f"{DEPLOY / 'wheels'}:/wheels:ro"]
    t0 = time.perf_counter()
    sh(*args, *(["--no-cache"] if cold else []), "--target", "runtime-slim", "-t", IMAGE, str(ROOT), timeout=1800)
    figures["build_cold_s" if cold else "build_warm_s"] = round(time.perf_counter() - t0, 1)
    if not cold:
        sh(*args, "--target", "deps", "-t", DEPS_IMAGE, str(ROOT), timeout=900)
        sizes = {}
        for name in (MINBASE, PYBASE, DEPS_IMAGE, IMAGE, REDIS):
            size = sh("podman", "image", "inspect", "--format", "{{.Size}}", name).stdout.strip()
            sizes[name] = round(int(size) / 1e6, 1)
        figures["image_mb"] = sizes


# -- 3. the manifests as pods ------------------------------------------------------------------------------

def _env(container: dict, maps: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    out: dict[str, str] = {}
    for source in container.pop("envFrom", None) or []:
        ref = source.get("configMapRef") or source.get("secretRef")
        out.update(maps.get(ref["name"], {}))
    for e in container.get("env", []):
        if "value" in e:
            out[e["name"]] = e["value"]
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            out[e["name"]] = maps.get(ref["name"], {}).get(ref["key"], "")
        elif "fieldRef" in e.get("valueFrom", {}):
            out[e["name"]] = "reasoning-0" if "INSTANCE" in e["name"] else "korean-mesh"
    for key, value in list(out.items()):
        for host, local in HOSTS.items():
            value = value.replace(host, local)
        out[key] = value
    return [{"name": k, "value": v} for k, v in out.items()]


def owned(path: Path, user: tuple[int, int]) -> Path:
    """``path`` created empty and owned by the pod's user (podman applies no fsGroup)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    os.chown(path, *user)
    return path


def playable(rendered: str, llm_dir: Path, gguf_dir: Path, models_dir: Path,
             data_dir: Path) -> tuple[list[dict], dict]:
    """The overlay's objects turned into Pods podman plays on one host (see DIFFERENCES); and the probes."""
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    maps: dict[str, dict[str, str]] = {}
    for d in docs:
        if d["kind"] == "ConfigMap":
            maps[d["metadata"]["name"]] = dict(d.get("data") or {})
        elif d["kind"] == "Secret":
            data = {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
            maps[d["metadata"]["name"]] = {**data, **(d.get("stringData") or {})}
    maps.setdefault("mesh-gateway-keys", {})["MESH_GATEWAY_API_KEYS"] = API_KEY  # not the placeholder keys
    pods, probes = [], {}
    for d in docs:
        if d["kind"] not in ("Deployment", "StatefulSet") or d["metadata"]["name"] == "qdrant":
            continue
        name = d["metadata"]["name"]
        spec = d["spec"]["template"]["spec"]
        spec["hostNetwork"] = True
        context = spec.get("securityContext", {})
        user = (int(context.get("runAsUser", 10001)), int(context.get("fsGroup", context.get("runAsGroup", 10001))))
        for key in ("topologySpreadConstraints", "affinity", "serviceAccountName", "terminationGracePeriodSeconds"):
            spec.pop(key, None)
        spec.get("securityContext", {}).pop("seccompProfile", None)
        volumes = [v for v in spec.get("volumes", []) if "secret" not in v]
        for claim in d["spec"].get("volumeClaimTemplates", []):  # a claim: a directory of this host, as a PV is
            volumes.append({"name": claim["metadata"]["name"], "hostPath": {
                "path": str(owned(data_dir / f"{name}-{claim['metadata']['name']}", user)), "type": "Directory"}})
        for c in spec["containers"]:
            c.pop("resources", None)
            c.pop("ports", None)  # on the host network the ports are the host's (podman refuses mappings)
            c["imagePullPolicy"] = "Never"
            c["env"] = _env(c, maps)
            c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] != "qdrant-key"]
            image = c["image"]
            if image.startswith("korean-mesh-llm"):
                c["image"], c["args"] = IMAGE, ["llm"]
                c["env"] += [{"name": k, "value": v} for k, v in LLM_ENV.items()]  # the llm target's ENV
                c["volumeMounts"] += [{"name": "llm-server", "mountPath": "/opt/llm", "readOnly": True},
                                      {"name": "llm-models", "mountPath": "/opt/llm-models", "readOnly": True}]
                volumes += [{"name": "llm-server", "hostPath": {"path": str(llm_dir), "type": "Directory"}},
                            {"name": "llm-models", "hostPath": {"path": str(gguf_dir), "type": "Directory"}}]
            elif image.startswith("korean-mesh"):
                c["image"] = IMAGE
                c["volumeMounts"].append({"name": "models", "mountPath": "/opt/models", "readOnly": True})
                c["volumeMounts"].append({"name": "data", "mountPath": "/data"})
                volumes += [{"name": "models", "hostPath": {"path": str(models_dir), "type": "Directory"}},
                            {"name": "data", "hostPath": {"path": str(owned(data_dir / f"{name}-data", user)),
                                                          "type": "Directory"}}]
            elif image.startswith("redis"):
                c["image"] = REDIS
                if name == "redis-jobs":
                    c["args"] = [*c["args"], "--port", "6380"]
                    for probe in ("readinessProbe", "livenessProbe"):
                        if "exec" in c.get(probe, {}):
                            c[probe]["exec"]["command"] = ["redis-cli", "-p", "6380", "ping"]
            if name == "retrieval":
                c["env"] = [e for e in c["env"] if not e["name"].startswith("MESH_RETRIEVAL_QDRANT")]
                c["env"].append({"name": "MESH_RETRIEVAL_QDRANT_LOCATION", "value": "/data/qdrant"})
            role = c["name"] if c["name"] == "llm" else name
            probes[role] = {"container": f"{name}-{c['name']}",
                            "readiness": c.get("readinessProbe"), "liveness": c.get("livenessProbe")}
            c.pop("startupProbe", None)
        spec["volumes"] = list({v["name"]: v for v in volumes}.values())
        spec["restartPolicy"] = "Always"
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
                     "spec": spec})
    return pods, probes


def run_probe(role: str, container: str, probe: dict | None) -> bool:
    """One probe, as the kubelet runs it: exec in the container, gRPC/HTTP/TCP from the node (the host)."""
    if not probe:
        return True
    try:
        if "exec" in probe:
            return sh("podman", "exec", container, *probe["exec"]["command"], check=False, timeout=10).returncode == 0
        if "grpc" in probe:
            import grpc
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            with grpc.insecure_channel(f"127.0.0.1:{probe['grpc']['port']}") as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=4)
                return reply.status == health_pb2.HealthCheckResponse.SERVING
        if "httpGet" in probe:
            port = probe["httpGet"]["port"]
            port = PORTS["gateway"] if port == "http" else port
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe['httpGet']['path']}", timeout=4) as r:
                return 200 <= r.status < 400
        if "tcpSocket" in probe:
            import socket

            with socket.create_connection(("127.0.0.1", probe["tcpSocket"]["port"]), timeout=4):
                return True
    except Exception:  # noqa: BLE001 - a probe that raises failed
        return False
    return False


def play(pods: list[dict], probes: dict, folder: Path, timeout_s: float = 600) -> dict[str, float]:
    """``podman kube play``; seconds until each role's readiness probe passed (its liveness checked too)."""
    path = folder / "pods.yaml"
    path.write_text(yaml.safe_dump_all(pods, sort_keys=False))
    t0 = time.perf_counter()
    sh("podman", "kube", "play", str(path), timeout=300)
    ready: dict[str, float] = {}
    while len(ready) < len(probes) and time.perf_counter() - t0 < timeout_s:
        for role, p in probes.items():
            if role not in ready and run_probe(role, p["container"], p["readiness"]):
                if not run_probe(role, p["container"], p["liveness"]):
                    raise RuntimeError(f"{role}: ready but its liveness probe fails")
                ready[role] = round(time.perf_counter() - t0, 2)
                log(f"{role} ready after {ready[role]} s")
        time.sleep(0.5)
    missing = sorted(set(probes) - set(ready))
    if missing:
        raise RuntimeError(f"not ready after {timeout_s} s: {', '.join(missing)}")
    return ready


def down(folder: Path) -> None:
    """``podman kube down`` and any pod left over."""
    path = folder / "pods.yaml"
    if path.exists():
        sh("podman", "kube", "down", str(path), check=False, timeout=300)


# -- 3b. search and 4. faults through the containers -------------------------------------------------------

def api(method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, dict]:
    """A gateway call with the manifests' API key."""
    req = urllib.request.Request(f"http://127.0.0.1:{PORTS['gateway']}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json", "X-API-Key": API_KEY})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


DOCS = ["제주도 한 달 살기 여행 안내서", "서울 근교 당일치기 등산 코스", "부산 해운대 맛집 지도", "강릉 커피 거리 산책",
        "전주 한옥마을 한복 체험", "경주 불국사 역사 여행", "여수 밤바다 야경 명소", "속초 바다 캠핑 준비물"]


def ingest(name: str, n: int) -> tuple[int, dict]:
    """A collection ``name`` with ``n`` Korean documents (a job); its final state."""
    for _ in range(60):  # a service just back (a fault) may refuse for a moment
        created, body = api("POST", "/v1/collections", {"name": name, "fields": {"n": "integer"}})
        if created in (201, 409):
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"collection {name} not created: {created} {body}")
    docs = [{"id": f"d{i}", "text": f"{DOCS[i % len(DOCS)]} {i}번째 글", "payload": {"n": i}} for i in range(n)]
    status, job = api("POST", f"/v1/collections/{name}/documents", {"documents": docs, "batch_size": 16}, timeout=60)
    if status != 202:
        raise RuntimeError(f"ingest refused: {status} {job}")
    return status, job


def wait_job(job_id: str, timeout_s: float = 300) -> dict:
    """The job once it ended."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        try:
            status, state = api("GET", f"/v1/jobs/{job_id}")
        except OSError:
            status, state = 0, {}
        if status == 200 and state.get("state") in ("succeeded", "failed", "cancelled"):
            return state
        time.sleep(0.5)
    raise RuntimeError(f"job {job_id} did not end in {timeout_s} s")


QUERIES = ["바다 여행", "등산 코스", "맛집 지도", "커피 산책", "한옥 체험", "역사 여행", "야경 명소", "캠핑 준비물"]


def search(collection: str = "check", i: int = 0) -> tuple[int, dict]:
    """One Korean search; ``i`` varies the words, so the gateway's query-vector cache cannot answer for the model."""
    query = f"{QUERIES[i % len(QUERIES)]} {i}번" if i else QUERIES[0]
    try:
        return api("POST", "/v1/search", {"collection": collection, "query": query, "top_k": 3})
    except OSError as err:
        return 0, {"error": str(err)}


def faults(figures: dict) -> dict[str, Any]:
    """Embedding stopped during searches; retrieval killed mid-ingest; Redis (cache) restarted."""
    out: dict[str, Any] = {}
    # a) the embedding pod stopped while searches run
    seen: list[tuple[int, str, bool]] = []
    stop = threading.Event()

    def searching() -> None:
        while not stop.is_set():
            status, body = search(i=len(seen) + 1)
            seen.append((status, body.get("mode", ""), bool(body.get("degraded"))))
            time.sleep(0.1)

    worker = threading.Thread(target=searching)
    worker.start()
    time.sleep(1.0)
    sh("podman", "pod", "stop", "-t", "2", "embedding")
    time.sleep(4.0)
    during = len(seen)
    sh("podman", "pod", "start", "embedding")
    t0 = time.perf_counter()
    back = None
    while time.perf_counter() - t0 < 120:
        status, body = search(i=1000 + int(time.perf_counter() * 10))
        if status == 200 and body.get("mode") == "hybrid" and not body.get("degraded"):
            back = round(time.perf_counter() - t0, 2)
            break
        time.sleep(0.5)
    stop.set()
    worker.join()
    stopped = seen[during - 20:during] if during >= 20 else seen[:during]
    out["embedding_stopped"] = {
        "searches": len(seen), "statuses": sorted({s for s, _, _ in seen}),
        "keyword_only_marked": sum(1 for s, m, d in stopped if s == 200 and m == "keyword" and d),
        "last_searches_while_stopped": len(stopped), "dense_again_after_s": back}
    # b) the retrieval container killed mid-ingest: the job resumes, nothing acknowledged lost
    n = 600
    _, job = ingest("killed", n)
    time.sleep(1.5)
    sh("podman", "kill", "retrieval-retrieval", check=False)
    t0 = time.perf_counter()
    restarted_by = "podman (restart policy Always)"
    time.sleep(5)
    state_now = sh("podman", "inspect", "--format", "{{.State.Running}}", "retrieval-retrieval", check=False)
    if state_now.stdout.strip() != "true":  # podman 4.3 without systemd may not restart it: as a kubelet would
        sh("podman", "start", "retrieval-retrieval")
        restarted_by = "this script (podman start), as the kubelet would"
    back_after = None
    for _ in range(120):
        if run_probe("retrieval", "retrieval-retrieval", {"grpc": {"port": PORTS["retrieval"]}}):
            back_after = round(time.perf_counter() - t0, 2)
            break
        time.sleep(0.5)
    logs = "" if back_after else sh("podman", "logs", "--tail", "5", "retrieval-retrieval", check=False).stderr[-800:]
    state = wait_job(job["id"], timeout_s=600)
    _, info = api("GET", "/v1/collections/killed")
    out["retrieval_killed"] = {"documents": n, "job": state.get("state"), "done": state.get("done"),
                               "stored": info.get("documents"), "lost": n - int(info.get("documents") or 0),
                               "restarted_by": restarted_by, "retrieval_ready_after_kill_s": back_after,
                               **({"retrieval_log": logs} if logs else {}),
                               "job_end_after_kill_s": round(time.perf_counter() - t0, 2)}
    # c) Redis (the cache) restarted: searches keep answering (the cache fails open)
    before = [search(i=2000 + k)[0] for k in range(5)]
    sh("podman", "pod", "restart", "redis-cache")
    statuses = [search(i=3000 + k)[0] for k in range(20)]
    out["redis_restarted"] = {"searches": len(statuses), "ok": statuses.count(200), "statuses": sorted(set(statuses)),
                              "ok_before": before.count(200)}
    return out


# -- 3c. the compose file's cpu profile with podman-compose ------------------------------------------------

COMPOSE_LEFT_OUT = ("qdrant", "prometheus", "alertmanager", "grafana", "jaeger")
COMPOSE_DIFFERENCES = [
    "qdrant, prometheus, alertmanager, grafana and jaeger are left out (no image here; Prometheus and "
    "Alertmanager run as Debian packages in `make ops` instead): retrieval uses its embedded engine on a "
    "volume at /data, spans are not exported (MESH_*_TRACE_EXPORTER=none)",
    "images: the mesh image → localhost/korean-mesh:check (runtime-slim; the model cache, llama-server and "
    "the GGUF mounted read-only from the host), redis → localhost/mesh-redis; no build sections",
    "depends_on without health conditions (podman 4.3 runs no health checks by itself: each service's own "
    "health-check command is executed by this script instead)",
    "the gateway's API key is one made for the check",
]


def compose_file(source: Path, llm_dir: Path, gguf_dir: Path, models_dir: Path) -> dict:
    """The compose file's cpu profile as podman-compose runs it here (see COMPOSE_DIFFERENCES)."""
    doc = yaml.safe_load(source.read_text())
    services = {}
    for name, svc in doc["services"].items():
        if "cpu" not in svc.get("profiles", []) or name in COMPOSE_LEFT_OUT:
            continue
        svc.pop("build", None)
        env = {k: v for k, v in (svc.get("environment") or {}).items() if not k.startswith("OTEL_")}
        for key in list(env):
            if key.endswith("_TRACE_EXPORTER"):
                env[key] = "none"
        depends = svc.get("depends_on") or {}
        svc["depends_on"] = [d for d in depends if d not in COMPOSE_LEFT_OUT]
        if not svc["depends_on"]:
            svc.pop("depends_on")
        image = str(svc.get("image", ""))
        if name == "llm":
            svc["image"], svc["command"] = IMAGE, ["llm"]
            env.update(LLM_ENV)
            svc["volumes"] = [f"{llm_dir}:/opt/llm:ro", f"{gguf_dir}:/opt/llm-models:ro"]
        elif image.startswith("redis"):
            svc["image"] = REDIS
        else:
            svc["image"] = IMAGE
            svc["volumes"] = [*svc.get("volumes", []), f"{models_dir}:/opt/models:ro"]
        if name == "retrieval":
            env["MESH_RETRIEVAL_QDRANT_LOCATION"] = "/data/qdrant"
            svc["volumes"].append("retrieval-data:/data")
        if name == "gateway":
            env["MESH_GATEWAY_API_KEYS"] = API_KEY
        svc["environment"] = env
        services[name] = svc
    volumes = {k: v for k, v in (doc.get("volumes") or {}).items() if k in {"redis-jobs-data"}}
    volumes["retrieval-data"] = None
    return {"name": "korean-mesh-check", "services": services, "volumes": volumes}


def compose(figures: dict, folder: Path, llm_dir: Path, models: Path) -> dict[str, Any]:
    """``podman-compose --profile cpu up``: each service's health command, then a search through the gateway."""
    venv = DEPLOY / "podman-compose"
    if not (venv / "bin" / "podman-compose").exists():
        log("installing podman-compose (PyPI) into its own venv")
        sh(sys.executable, "-m", "venv", str(venv))
        sh(str(venv / "bin" / "pip"), "install", "-q", "podman-compose==1.6.0", timeout=600)
    path = folder / "compose.yaml"
    spec = compose_file(ROOT / "infra/compose/compose.yaml", llm_dir, CACHE / "llm", models)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    tool = [str(venv / "bin" / "podman-compose"), "-f", str(path), "--profile", "cpu"]
    out: dict[str, Any] = {"services": sorted(spec["services"])}
    t0 = time.perf_counter()
    try:
        sh(*tool, "up", "-d", timeout=600)
        ready: dict[str, float] = {}
        names = {s: f"korean-mesh-check_{s}_1" for s in spec["services"]}
        while len(ready) < len(names) and time.perf_counter() - t0 < 300:
            for service, container in names.items():
                check = spec["services"][service].get("healthcheck", {}).get("test")
                if service in ready:
                    continue
                if check and check[0] == "CMD":
                    passed = sh("podman", "exec", container, *check[1:], check=False, timeout=15).returncode == 0
                elif check and check[0] == "CMD-SHELL":
                    passed = sh("podman", "exec", container, "sh", "-c", check[1], check=False,
                                timeout=15).returncode == 0
                else:  # no health check declared (llm): its port answers
                    passed = sh("podman", "exec", container, "python", "-c", "import urllib.request as u; "
                                "u.urlopen('http://127.0.0.1:8081/v1/models', timeout=4)", check=False,
                                timeout=15).returncode == 0
                if passed:
                    ready[service] = round(time.perf_counter() - t0, 2)
                    log(f"compose {service} healthy after {ready[service]} s")
            time.sleep(1)
        out["ready_s"] = ready
        out["not_ready"] = sorted(set(names) - set(ready))
        _, job = ingest("composed", 40)
        wait_job(job["id"])
        status, found = search("composed")
        out["search"] = {"status": status, "hits": len(found.get("hits", [])), "mode": found.get("mode")}
    finally:
        sh(*tool, "down", "-v", check=False, timeout=300)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the image from cache, one start, one search, no faults")
    parser.add_argument("--keep", action="store_true", help="keep the images (the pods are removed)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"quick": args.quick, "differences": DIFFERENCES}
    folder = Path(tempfile.mkdtemp(prefix="deploy-check-"))
    t_all = time.perf_counter()
    ok = False
    dangling_before = set(dangling()) if shutil.which("podman") else set()
    try:
        prepare(figures)
        if not args.quick:
            log("building the image cold (--no-cache)")
            build(figures, cold=True)
        log("building the image (layer cache)")
        build(figures, cold=False)
        llm_dir = (ROOT / ".llama-server").resolve()
        models = CACHE / "models"
        rendered = sh("kubectl", "kustomize", str(ROOT / "infra/k8s/overlays/dev")).stdout
        pods, probes = playable(rendered, llm_dir, CACHE / "llm", models, folder / "volumes")
        starts = []
        for i in range(1 if args.quick else 3):
            log(f"podman kube play ({i + 1})")
            starts.append(play(pods, probes, folder))
            if i == 0:
                status, _ = ingest("check", 40)
                status, found = search()
                figures["search"] = {"status": status, "hits": len(found.get("hits", [])),
                                     "mode": found.get("mode"), "top": (found.get("hits") or [{}])[0].get("text")}
                if status != 200 or not found.get("hits"):
                    # the ingest job may still be running: wait for it once
                    time.sleep(5)
                    status, found = search()
                    figures["search"] = {"status": status, "hits": len(found.get("hits", [])),
                                         "mode": found.get("mode"),
                                         "top": (found.get("hits") or [{}])[0].get("text")}
                if not args.quick:
                    figures["faults"] = faults(figures)
            down(folder)
        if not args.quick:
            log("the compose file's cpu profile with podman-compose")
            figures["compose"] = compose(figures, folder, llm_dir, models)
            figures["compose_differences"] = COMPOSE_DIFFERENCES
        figures["ready_s"] = {role: statistics.median(s[role] for s in starts) for role in starts[0]}
        figures["ready_runs"] = starts
        ok = figures["search"]["status"] == 200 and figures["search"]["hits"] > 0
        if "compose" in figures:
            ok = ok and figures["compose"]["search"]["status"] == 200 and not figures["compose"]["not_ready"]
    finally:
        down(folder)
        if not args.keep:  # what this run made: the images, the layers its builds left untagged, the bases
            for name in (IMAGE, DEPS_IMAGE, REDIS, PYBASE, MINBASE):  # (the minbase stays as an archive)
                sh("podman", "rmi", "-f", name, check=False)
            for image in set(dangling()) - dangling_before:
                sh("podman", "rmi", "-f", image, check=False)
        shutil.rmtree(folder, ignore_errors=True)
        figures["total_s"] = round(time.perf_counter() - t_all, 1)
        write(figures, args.out, ok)
    return 0 if ok else 1


def write(figures: dict, out: Path, ok: bool) -> None:
    """bench/results/deploy.md and .json."""
    sys.path.insert(0, str(ROOT))
    from bench.report import write_result

    lines = [f"- Result: **{'passed' if ok else 'FAILED'}** in {figures.get('total_s')} s "
             f"(podman {sh('podman', '--version').stdout.split()[-1]}).", ""]
    if "build_warm_s" in figures:
        lines += [f"- Image build: cold {figures.get('build_cold_s', '—')} s (no layer cache, the wheelhouse "
                  f"mounted), warm {figures['build_warm_s']} s; preparation {figures.get('prepare_s')} s.", ""]
    if "image_mb" in figures:
        lines += ["| image (stage) | MB |", "|---|---|", *(f"| {k} | {v} |" for k, v in figures["image_mb"].items()),
                  ""]
    if "ready_s" in figures:
        lines += ["| role | start to ready, s (p50) |", "|---|---|",
                  *(f"| {k} | {v} |" for k, v in figures["ready_s"].items()), ""]
    if "search" in figures:
        lines += [f"- Search through the containers: {figures['search']}", ""]
    for name, result in figures.get("faults", {}).items():
        lines.append(f"- Fault `{name}`: {json.dumps(result, ensure_ascii=False)}")
    if "compose" in figures:
        c = figures["compose"]
        lines += ["", f"- Compose (`podman-compose` 1.6.0, profile cpu, services {', '.join(c['services'])}): "
                      f"healthy after {c.get('ready_s')} s; not healthy: {c.get('not_ready') or 'none'}; "
                      f"search through the gateway: {c.get('search')}",
                  "", "What this host changes in the compose file:", "",
                  *(f"- {d}" for d in COMPOSE_DIFFERENCES)]
    lines += ["", "What this host changes in the manifests (podman on one host):", "",
              *(f"- {d}" for d in DIFFERENCES), ""]
    write_result("deploy" if not figures["quick"] else "deploy_quick", "Deployment check (podman)", lines, figures,
                 out=out, command="make deploy-check" if not figures["quick"] else "make deploy-check-quick")


if __name__ == "__main__":
    sys.exit(main())
