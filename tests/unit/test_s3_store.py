"""MinIO or an external S3: the registry (does the minio module run?) and the roles (whose keys do the workloads
read?) answer from one rule, installer.s3_store."""

from __future__ import annotations

import pytest
from role_harness import filter_plugins

from installer.config.defaults import apply_defaults
from installer.modules import get_module

EXTERNAL = filter_plugins("kubesphere-defaults", "ks_s3").FilterModule().filters()["ks_external_s3"]


@pytest.mark.parametrize(("s3", "external"), [
    ({}, False),
    ({"endpoint": ""}, False),
    ({"endpoint": "https://s3.example.com", "accessKeyID": "ak", "secretAccessKey": "sk"}, True),
])
@pytest.mark.parametrize("consumer", ["devops", "openpitrix.store"])
def test_minio_runs_exactly_when_the_roles_read_minio(s3: dict, external: bool, consumer: str) -> None:
    section, _, sub = consumer.partition(".")
    spec = apply_defaults({"common": {"s3": s3}, section: {sub: {"enabled": True}} if sub else {"enabled": True}})
    assert EXTERNAL(spec["common"]) is external
    assert get_module("minio").enabled(spec) is not external


def test_no_consumer_no_minio() -> None:
    assert get_module("minio").enabled(apply_defaults({})) is False
    assert EXTERNAL(None) is False and EXTERNAL({"s3": "not a map"}) is False
