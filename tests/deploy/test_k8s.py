"""deploy/k8s: every document validates strictly against the Kubernetes 1.30 schemas,
kustomizations list existing files, and the pod specs follow the deployment rules."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import K8S

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S_VERSION = "1.30.0"
ALLOWED_CAPS = {"IPC_LOCK"}


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.y*ml") if p.name != "kustomization.yaml")


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in manifest_files():
        for i, doc in enumerate(yaml.safe_load_all(p.read_text(encoding="utf-8"))):
            if doc is not None:
                out.append((f"{p.relative_to(K8S)}#{i}:{doc.get('kind')}", doc))
    return out


DOCS = documents()
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"}


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def workloads() -> list[tuple[str, dict[str, Any]]]:
    return [(name, d) for name, d in DOCS if d.get("kind") in WORKLOADS]


def test_found_manifests():
    kinds = {d["kind"] for _, d in DOCS}
    assert {"Namespace", "Deployment", "DaemonSet", "Service", "ConfigMap", "NetworkPolicy",
            "PodDisruptionBudget", "Job"} <= kinds


@pytest.mark.parametrize(("name", "doc"), DOCS, ids=[n for n, _ in DOCS])
def test_validates_strictly(name, doc):
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_strict_validation_rejects_unknown_fields():
    # Guard against a validator that silently accepts everything.
    _, deployment = next((n, d) for n, d in DOCS if d["kind"] == "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def kustomizations() -> list[Path]:
    return sorted(K8S.rglob("kustomization.yaml"))


@pytest.mark.parametrize("path", kustomizations(), ids=lambda p: str(p.relative_to(K8S)))
def test_kustomization_lists_existing_files(path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["kind"] in {"Kustomization", "Component"}
    for key in ("resources", "components"):
        for entry in data.get(key) or []:
            target = (path.parent / entry).resolve()
            assert target.exists(), f"{path}: {key} entry {entry!r} does not exist"
            if target.is_file():
                assert list(yaml.safe_load_all(target.read_text(encoding="utf-8")))


def test_top_level_kustomization_matches_apply_f():
    # `kubectl apply -k deploy/k8s` and `kubectl apply -f deploy/k8s` apply the same files.
    data = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    listed = set(data["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert listed == on_disk


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_kustomize_builds():
    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True,
                         timeout=20, check=False)
    assert out.returncode == 0, out.stderr
    assert {d["kind"] for d in yaml.safe_load_all(out.stdout)} >= {"Deployment", "DaemonSet"}


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("initContainers") or []) + list(spec["containers"])


@pytest.mark.parametrize(("name", "doc"), workloads(), ids=[n for n, _ in workloads()])
def test_pod_security_and_resources(name, doc):
    spec = pod_spec(doc)
    pod_sc = spec.get("securityContext") or {}
    assert spec.get("automountServiceAccountToken") is False, name
    for c in containers(spec):
        sc = c.get("securityContext") or {}
        where = f"{name} container {c['name']}"
        assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
        assert sc.get("runAsUser", pod_sc.get("runAsUser", 1)) != 0, where
        assert sc.get("allowPrivilegeEscalation") is False, where
        assert sc.get("privileged") is not True, where
        assert sc.get("readOnlyRootFilesystem") is True, where
        caps = sc.get("capabilities") or {}
        assert caps.get("drop") == ["ALL"], where
        assert set(caps.get("add") or []) <= ALLOWED_CAPS, where
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(res.get(kind) or {}), f"{where}: {kind}"
        assert ":latest" not in c["image"] and ":" in c["image"], where


@pytest.mark.parametrize(("name", "doc"), workloads(), ids=[n for n, _ in workloads()])
def test_long_running_pods_have_probes(name, doc):
    if doc["kind"] in {"Job", "CronJob"}:
        return
    for c in pod_spec(doc)["containers"]:
        assert c.get("livenessProbe") and c.get("readinessProbe"), f"{name} {c['name']}"


def agent_daemonset() -> dict[str, Any]:
    return next(d for _, d in DOCS if d["kind"] == "DaemonSet")


def test_agent_daemonset_shape():
    ds = agent_daemonset()
    spec = pod_spec(ds)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert any(t.get("key") == "nvidia.com/gpu" and t.get("effect") == "NoSchedule"
               for t in spec["tolerations"])
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"]
    (agent,) = spec["containers"]
    assert any(m["mountPath"] == "/dev/shm" for m in agent["volumeMounts"])
    assert agent["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert "8470" in agent["args"] and "agent" in agent["args"]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/health"
    # Never steals GPUs from training by default.
    for kind in ("requests", "limits"):
        assert not any(k.startswith("nvidia.com/") for k in agent["resources"].get(kind, {}))


def test_network_policy_only_bot_reaches_agent_port():
    (np,) = [d for _, d in DOCS if d["kind"] == "NetworkPolicy"]
    agent_labels = agent_daemonset()["spec"]["template"]["metadata"]["labels"]
    assert np["spec"]["podSelector"]["matchLabels"].items() <= agent_labels.items()
    bot = next(d for _, d in DOCS if d["kind"] == "Deployment")
    bot_labels = bot["spec"]["template"]["metadata"]["labels"]
    rules = np["spec"]["ingress"]
    api_rules = [r for r in rules if any(p.get("port") == 8470 for p in r.get("ports", []))]
    assert api_rules
    for rule in api_rules:
        for peer in rule["from"]:
            assert peer["podSelector"]["matchLabels"].items() <= bot_labels.items()
    # Any rule without ports (all ports) admits only agents (multi-node probe traffic).
    for rule in rules:
        if not rule.get("ports"):
            for peer in rule["from"]:
                assert peer["podSelector"]["matchLabels"].items() <= agent_labels.items()


def test_pdb_selects_the_bot():
    (pdb,) = [d for _, d in DOCS if d["kind"] == "PodDisruptionBudget"]
    bot = next(d for _, d in DOCS if d["kind"] == "Deployment")
    assert pdb["spec"]["selector"] == bot["spec"]["selector"]


def test_probe_job_requests_gpus_and_uses_c10d():
    job = next(d for _, d in DOCS if d["kind"] == "Job")
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"]
    spec = pod_spec(job)
    svc = next(d for _, d in DOCS if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None")
    assert spec["subdomain"] == svc["metadata"]["name"]
    (c,) = spec["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"]["nvidia.com/gpu"]
    cmd = " ".join(c.get("command", []) + c.get("args", []))
    assert "torchrun" in cmd and "--rdzv-backend=c10d" in cmd
    assert f"{job['metadata']['name']}-0.{svc['metadata']['name']}" in cmd


def test_node_inventory_format():
    cm = next(d for _, d in DOCS if d["kind"] == "ConfigMap" and "nodes.yaml" in d["data"])
    inv = yaml.safe_load(cm["data"]["nodes.yaml"])
    assert inv["nodes"]
    for name, node in inv["nodes"].items():
        assert node["url"].startswith(("http://", "https://")) and node["url"].endswith(":8470")
        assert name


def test_secrets_are_referenced_not_inlined():
    # Real Secrets are created out of band; only the example (placeholders) is in git.
    for name, d in DOCS:
        if d["kind"] == "Secret":
            assert name.startswith("examples/"), name
            for value in (d.get("stringData") or {}).values():
                assert "REPLACE-ME" in value, f"{name}: not a placeholder"


TLS_ENV = ("NCCLBOT_AGENT_TLS_CERT", "NCCLBOT_AGENT_TLS_KEY")


def env_names(container: dict[str, Any], docs: list[dict[str, Any]]) -> set[str]:
    """Environment variables a container gets: `env` plus keys of ConfigMaps in envFrom."""
    names = {e["name"] for e in container.get("env") or []}
    for src in container.get("envFrom") or []:
        ref = (src.get("configMapRef") or {}).get("name")
        names |= {k for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == ref
                  for k in d.get("data") or {}}
    return names


def agent_tls_problems(docs: list[dict[str, Any]]) -> list[str]:
    """Where the node inventory's scheme disagrees with what the agents serve: https://
    needs the agent's TLS cert and key (and HTTPS probes) and a CA for the bot to verify
    them; http:// needs an agent without TLS."""
    inventory = next(d for d in docs if d["kind"] == "ConfigMap" and "nodes.yaml" in d["data"])
    urls = [n["url"] for n in yaml.safe_load(inventory["data"]["nodes.yaml"])["nodes"].values()]
    schemes = {u.split("://", 1)[0] for u in urls}
    if len(schemes) != 1:
        return [f"inventory mixes schemes: {sorted(schemes)}"]
    (scheme,) = schemes
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    (agent,) = pod_spec(ds)["containers"]
    agent_env = env_names(agent, docs)
    tls = set(TLS_ENV) <= agent_env
    problems = []
    if scheme == "https" and not tls:
        problems.append("inventory uses https:// but the agent gets no TLS cert/key")
    if scheme == "http" and agent_env & set(TLS_ENV):
        problems.append("inventory uses http:// but the agent is given TLS settings")
    probe_scheme = "HTTPS" if tls else "HTTP"
    for kind in ("readinessProbe", "livenessProbe"):
        get = (agent.get(kind) or {}).get("httpGet")
        if get is not None and get.get("scheme", "HTTP") != probe_scheme:
            problems.append(f"agent {kind} uses {get.get('scheme', 'HTTP')}, not {probe_scheme}")
    bot = next(d for d in docs if d["kind"] == "Deployment")
    bot_env = env_names(pod_spec(bot)["containers"][0], docs)
    if scheme == "https" and "NCCLBOT_AGENT_CA_FILE" not in bot_env:
        problems.append("inventory uses https:// but the bot has no NCCLBOT_AGENT_CA_FILE")
    return problems


def test_inventory_scheme_matches_agent_tls():
    assert agent_tls_problems([d for _, d in DOCS]) == []


def test_inventory_tls_check_catches_mismatches():
    docs = copy.deepcopy([d for _, d in DOCS])
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and "nodes.yaml" in d["data"])
    plain = cm["data"]["nodes.yaml"]
    cm["data"]["nodes.yaml"] = plain.replace("http://", "https://")
    assert any("no TLS cert/key" in p for p in agent_tls_problems(docs))
    # TLS wired on both sides: consistent again
    (agent,) = pod_spec(next(d for d in docs if d["kind"] == "DaemonSet"))["containers"]
    agent["env"] += [{"name": n, "value": f"/etc/ncclbot/tls/{n}"} for n in TLS_ENV]
    for kind in ("readinessProbe", "livenessProbe"):
        agent[kind]["httpGet"]["scheme"] = "HTTPS"
    bot = pod_spec(next(d for d in docs if d["kind"] == "Deployment"))["containers"][0]
    bot["env"].append({"name": "NCCLBOT_AGENT_CA_FILE", "value": "/etc/ncclbot/ca.crt"})
    assert agent_tls_problems(docs) == []
    cm["data"]["nodes.yaml"] = plain
    assert any("is given TLS settings" in p for p in agent_tls_problems(docs))


# -- kustomize components (variants), each built on top of the base ------------------------
VARIANTS = sorted(p.parent.name for p in (K8S / "variants").glob("*/kustomization.yaml"))


def build_with(variant: str, tmp_path: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of the base with one component enabled, as the top-level
    kustomization's `components:` would."""
    base = Path(os.path.relpath(K8S, tmp_path))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [str(base)], "components": [str(base / "variants" / variant)]}))
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_builds_and_validates(variant: str, tmp_path: Path) -> None:
    docs = build_with(variant, tmp_path)
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        if doc["kind"] in WORKLOADS:
            if variant == "agent-hang" and doc["kind"] == "DaemonSet":
                doc = without_hang_access(doc)  # its one exception, checked below
            test_pod_security_and_resources(doc["metadata"]["name"], doc)
            test_long_running_pods_have_probes(doc["metadata"]["name"], doc)
    assert agent_tls_problems(docs) == []


def without_hang_access(agent: dict[str, Any]) -> dict[str, Any]:
    """The agent of the agent-hang variant with exactly what the variant grants taken away
    (root, SYS_PTRACE, hostPID, --allow-root, and the dump reader's SYS_CHROOT, SETUID and
    SETGID to take the rank's credentials); anything else it loosened still fails."""
    doc = copy.deepcopy(agent)
    spec = pod_spec(doc)
    assert spec.pop("hostPID") is True
    (c,) = spec["containers"]
    sc = c["securityContext"]
    assert (sc.pop("runAsUser"), sc.pop("runAsNonRoot")) == (0, False)
    for cap in ("SYS_PTRACE", "SYS_CHROOT", "SETUID", "SETGID"):
        sc["capabilities"]["add"].remove(cap)
    assert c["args"][-1] == "--allow-root"
    return doc


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_agent_hang_variant_grants_only_what_hang_needs(tmp_path: Path) -> None:
    (agent,) = [d for d in build_with("agent-hang", tmp_path) if d["kind"] == "DaemonSet"]
    (base,) = [d for _, d in DOCS if d["kind"] == "DaemonSet"]
    assert pod_spec(agent)["hostPID"] is True and "hostPID" not in pod_spec(base)
    stripped = without_hang_access(agent)
    assert pod_spec(stripped)["containers"][0]["args"][:-1] == pod_spec(base)["containers"][0][
        "args"]


def replicas_2_problems(docs: list[dict[str, Any]]) -> list[str]:
    """What keeps the bot from running as two replicas on shared PostgreSQL state."""
    bot = next(d for d in docs if d["kind"] == "Deployment")
    spec = pod_spec(bot)
    problems = []
    if bot["spec"]["replicas"] != 2:
        problems.append(f"replicas: {bot['spec']['replicas']}")
    if bot["spec"].get("strategy", {}).get("type") == "Recreate":
        problems.append("Recreate strategy: both replicas stop at once")
    if any(d["kind"] == "PersistentVolumeClaim" for d in docs) or any(
            "persistentVolumeClaim" in v for v in spec["volumes"]):
        problems.append("a PVC for the state")
    (container,) = spec["containers"]
    url = next((e for e in container.get("env") or [] if e["name"] == "NCCLBOT_DATABASE_URL"),
               None)
    if url is None or "secretKeyRef" not in url.get("valueFrom", {}):
        problems.append("NCCLBOT_DATABASE_URL does not come from a Secret")
    if "NCCLBOT_SQLITE_PATH" in env_names(container, docs):
        problems.append("NCCLBOT_SQLITE_PATH still set")
    (pdb,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if pdb["spec"].get("minAvailable") != 1 or "maxUnavailable" in pdb["spec"]:
        problems.append(f"PDB: {pdb['spec']}")
    if pdb["spec"]["selector"] != bot["spec"]["selector"]:
        problems.append("PDB does not select the bot")
    return problems


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_replicas_2_variant_shares_state_in_postgres(tmp_path: Path) -> None:
    assert replicas_2_problems(build_with("replicas-2", tmp_path)) == []
    # the base, one replica on SQLite, is what the check is there to catch
    assert len(replicas_2_problems([d for _, d in DOCS])) == 6


def test_replicas_2_variant_patches_without_kubectl() -> None:
    """The component's patches, read as they are (for machines without kubectl)."""
    data = yaml.safe_load((K8S / "variants" / "replicas-2" / "kustomization.yaml").read_text())
    assert data["kind"] == "Component"
    patches = {p["target"]["kind"]: yaml.safe_load(p["patch"]) for p in data["patches"]}
    deploy = patches["Deployment"]
    assert deploy["spec"]["replicas"] == 2
    (bot,) = deploy["spec"]["template"]["spec"]["containers"]
    assert bot["env"] == [{"name": "NCCLBOT_DATABASE_URL", "valueFrom": {"secretKeyRef": {
        "name": "ncclbot-secrets", "key": "database-url"}}}]
    assert deploy["spec"]["template"]["spec"]["volumes"] == [{"name": "state",
                                                              "$patch": "delete"}]
    assert patches["PersistentVolumeClaim"]["$patch"] == "delete"
    assert patches["PodDisruptionBudget"]["spec"] == {"maxUnavailable": None, "minAvailable": 1}
