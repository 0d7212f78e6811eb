"""Change lines (pod log, plan output, status) never show a credential, wherever it sits in the spec."""

from __future__ import annotations

from installer.changes import describe_changes


def test_oauth_client_secret_is_redacted() -> None:
    def idp(secret: str) -> dict:
        return {"authentication": {"oauthOptions": {"identityProviders": [
            {"name": "github", "provider": {"clientID": "id", "clientSecret": secret}}]}}}

    lines = describe_changes(idp("old-canary"), idp("new-canary"))
    assert lines == ["authentication.oauthOptions.identityProviders[0].provider.clientSecret: <redacted> -> "
                     "<redacted>"]


def test_a_whole_section_added_hides_the_credentials_inside() -> None:
    lines = describe_changes({"common": {}}, {"common": {"s3": {"endpoint": "https://s3", "secretAccessKey": "canary",
                                                                "accessKeyID": "ak-canary"}}})
    assert len(lines) == 1 and "canary" not in lines[0] and "https://s3" in lines[0]


def test_plain_values_are_shown() -> None:
    assert describe_changes({"etcd": {"port": 2379}}, {"etcd": {"port": 2380}}) == ["etcd.port: 2379 -> 2380"]
