"""`porchkit variants render`: what a set would produce, from files, and one line for every user error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

SET = """\
apiVersion: config.porch.kpt.dev/v1alpha2
kind: PackageVariantSet
metadata: {name: web, uid: 9e0f}
spec:
  upstream: {repo: catalog, package: web, workspaceName: v1}
  targets:
  - repositorySelector: {matchLabels: {env: prod}}
    template:
      downstream: {packageExpr: "'web-' + repository.labels['region']"}
      annotationExprs: [{key: upstream, valueExpr: upstream.name}]
"""

REPOSITORIES = """\
apiVersion: config.porch.kpt.dev/v1alpha1
kind: Repository
metadata: {name: edge-1, labels: {env: prod, region: eu}}
---
apiVersion: config.porch.kpt.dev/v1alpha1
kind: Repository
metadata: {name: lab, labels: {env: test, region: eu}}
"""

UPSTREAM = """\
apiVersion: porch.kpt.dev/v1alpha1
kind: PackageRevision
metadata: {name: catalog.web.v1, namespace: default}
spec: {repository: catalog, packageName: web, workspaceName: v1, revision: 1, lifecycle: Published}
"""


def porchkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porchkit", "variants", *args], capture_output=True, text=True)


def test_render_prints_the_package_variants_of_every_set(tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text(SET)
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "repositories.yaml").write_text(REPOSITORIES)
    (tmp_path / "fleet" / "upstream.yml").write_text(UPSTREAM)
    done = porchkit("render", "-f", str(tmp_path / "set.yaml"), "-f", str(tmp_path / "fleet"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    variants = list(yaml.safe_load_all(done.stdout))
    assert [(pv["metadata"]["name"], pv["metadata"]["namespace"]) for pv in variants] == [
        ("web-edge-1-web-eu", "default")]
    assert variants[0]["spec"]["annotations"] == {"upstream": "catalog.web.v1"}
    assert variants[0]["metadata"]["labels"] == {"config.porch.kpt.dev/packagevariantset": "9e0f"}


def test_a_missing_upstream_is_a_note_and_its_name_is_assumed(tmp_path: Path) -> None:
    (tmp_path / "all.yaml").write_text(SET + "---\n" + REPOSITORIES)
    done = porchkit("render", "-f", str(tmp_path / "all.yaml"))
    assert done.returncode == 0
    assert "could not find upstream package revision 'web/0' in repo 'catalog'" in done.stderr
    assert list(yaml.safe_load_all(done.stdout))[0]["spec"]["annotations"] == {"upstream": "catalog.web.v1"}


def test_an_invalid_set_is_one_line_naming_the_file_and_the_set(tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text(SET.replace("workspaceName: v1", "workspaceName: ''"))
    done = porchkit("render", "-f", str(tmp_path / "set.yaml"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"porchkit: {tmp_path / 'set.yaml'}: PackageVariantSet default/web: either "
                           "spec.upstream.revision or spec.upstream.workspaceName must be specified\n")


def test_a_template_error_names_the_file_the_set_the_target_and_the_field(tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text(SET.replace("repository.labels['region']", "repository.labels['zone']"))
    (tmp_path / "repositories.yaml").write_text(REPOSITORIES + "---\n" + UPSTREAM)
    done = porchkit("render", "-f", str(tmp_path / "set.yaml"), "-f", str(tmp_path / "repositories.yaml"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"porchkit: {tmp_path / 'set.yaml'}: PackageVariantSet web, "
                                  "target Repository/edge-1: template.downstream.packageExpr: no such key: zone")


def test_unreadable_input_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "scalar.yaml").write_text("just text\n")
    for path, expected in [(tmp_path / "nope.yaml", "no such file or directory"),
                           (tmp_path / "bad.yaml", "bad.yaml: "), (tmp_path / "scalar.yaml", "expected an object")]:
        done = porchkit("render", "-f", str(path))
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert expected in done.stderr
