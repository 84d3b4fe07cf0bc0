"""Zero to JupyterHub values and the single-user Dockerfile (classroom/k8s): what can be checked without Kubernetes or
Docker (neither exists here; classroom/README.md says so). The YAML parses and sets what the class depends on; the
Dockerfile pins its base image and packages, bakes the shared cache read-only and runs as a non-root user."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "classroom" / "k8s"


def test_values_set_what_the_class_needs():
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    single = values["singleuser"]
    assert single["cmd"] == "jupyterhub-singleuser"
    assert single["defaultUrl"].startswith("/git-pull?repo=")  # nbgitpuller delivers the series
    assert single["memory"]["limit"] == "2G" and single["memory"]["guarantee"] == "1G"
    assert single["extraEnv"]["ATTN_CORE_CACHE"] == "/opt/attn-cache"
    mounts = {mount["mountPath"] for mount in single["storage"]["extraVolumeMounts"]}
    assert single["extraEnv"]["ATTN_CLASS_EXCHANGE"] in mounts
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] > 0
    hook = values["hub"]["extraConfig"]["10-roles"]
    compile(hook, "extraConfig", "exec")  # the hub's Python snippet at least compiles
    for path in re.findall(r"/opt/attn-notebooks/(classroom/hub/\w+)", hook):
        assert (REPO / path).is_dir(), path


def test_dockerfile_is_pinned_and_bakes_the_cache():
    text = (K8S / "Dockerfile").read_text()
    base = re.search(r"^FROM (\S+)", text, re.M).group(1)
    assert ":" in base and not base.endswith(":latest")
    assert "pip install --no-cache-dir -r requirements.txt" in text and "torch==2.13.0" in text
    assert "ENV ATTN_CORE_CACHE=/opt/attn-cache" in text and "chmod -R a-w /opt/attn-cache" in text
    assert re.search(r"^USER (?!root|0\b)\S+", text, re.M)
    assert 'CMD ["jupyterhub-singleuser"]' in text
    config_path = re.search(r"JUPYTER_CONFIG_PATH=/opt/attn-notebooks/(\S+)", text).group(1)
    assert (REPO / config_path).is_dir()
