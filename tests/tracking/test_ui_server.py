"""What ``distrepro ui`` does to a store before it prints the addresses: the views brought up to date, and the arms
and seeds of an exploratory reproduction logged by an older distrepro (which tagged only its umbrella run) tagged
too, so that the confirmatory view leaves them out."""

from __future__ import annotations

import pytest

from distrepro.tracking.mlflow_client import REPRODUCTION_TAG, ensure_experiment, make_client
from distrepro.tracking.ui_server import addresses
from distrepro.tracking.ui_view import CONFIRMATORY_FILTER, EXPLORATORY_TAG, VIEW_TAG, view_state


def _reproduction(client, exp: str, exploratory: bool) -> list[str]:
    """An umbrella run, one arm and two seeds, as an older distrepro logged them: only the umbrella tagged."""
    tags = {"distrepro.reproduce": "proxy", **({EXPLORATORY_TAG: "true"} if exploratory else {})}
    umbrella = client.create_run(exp, run_name="reproduce p (proxy)", tags=tags).info.run_id
    arm = client.create_run(exp, run_name="sync", tags={REPRODUCTION_TAG: umbrella}).info.run_id
    seeds = [client.create_run(exp, run_name=f"sync/s{s}", tags={"mlflow.parentRunId": arm}) for s in (0, 1)]
    return [umbrella, arm, *(s.info.run_id for s in seeds)]


@pytest.mark.smoke
def test_an_older_exploratory_reproduction_is_tagged_whole(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    exp = ensure_experiment(client, "distrepro/p")
    client.set_experiment_tag(exp, VIEW_TAG, "{}")  # an older view
    registered = _reproduction(client, exp, exploratory=False)
    explored = _reproduction(client, exp, exploratory=True)
    (found,) = addresses(client, "http://h:1")
    assert found.experiment == "distrepro/p" and found.exploratory is not None
    assert client.get_experiment(exp).tags[VIEW_TAG] == view_state()
    assert sorted(r.info.run_id for r in client.search_runs([exp], CONFIRMATORY_FILTER)) == sorted(registered)
    assert all(client.get_run(r).data.tags.get(EXPLORATORY_TAG) == "true" for r in explored)
