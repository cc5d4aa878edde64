"""A cluster run never carries the team store's password (a password appears nowhere; Ray
shows a job's runtime_env to anyone who can list its jobs): the URL a job carries has none, in either
place libpq takes one. On the real cluster, tests/fleet/test_fleet.py's CLI run first fails on a node without
the password (naming ~/.pgpass), then lands with it in the node's ~/.pgpass, its job showing none."""

import pytest

from dashbench.fleet import launch


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://writer:p@ss/w@db:5432/team",
        "postgresql+psycopg://writer@db:5432/team?password=p%40ss%2Fw&sslmode=require",
    ],
)
def test_the_url_a_job_carries_has_no_password_in_either_place_libpq_takes_one(url):
    sent = launch.sent_url(url)
    assert sent.startswith("postgresql+psycopg://writer@db:5432/team") and "p@ss" not in sent and "p%40" not in sent
    assert ("sslmode=require" in sent) == ("sslmode" in url)
    assert "~/.pgpass" in launch.password_note(url) and launch.password_note(sent) is None
