"""Cell ids: the ids a server mints name its cell, a request for another cell's session
is refused with 421 naming it, and /create_session reports a full cell with 503 so a
router places the session elsewhere. (In-process apps; the real router and cells are in
tests/cluster/.)"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from orsbox.clock import SYSTEM_CLOCK, Clock, ManualClock
from orsbox.server.app import create_app
from orsbox.server.cells import CELL_OF_ID, cell_of, check_cell, default_cell, mint
from orsbox.settings import Settings
from tests.fixture_envs.protocol_envs import Protocol


def app_client(clock: Clock = SYSTEM_CLOCK, **settings: object) -> TestClient:
    app = create_app([Protocol], Settings(**settings), clock=clock)  # type: ignore[arg-type]
    return TestClient(app)


@pytest.fixture
def cell_a() -> Iterator[TestClient]:
    with app_client(cell="cell-a", max_sessions=2) as client:
        yield client


def new_sid(client: TestClient) -> str:
    r = client.post("/create_session")
    assert r.status_code == 200, r.text
    return r.json()["sid"]


def test_ids_name_their_cell_in_a_form_a_router_reads() -> None:
    sid, box = mint("orsbox-0"), mint("orsbox-0", "sbx-")
    assert cell_of(sid) == cell_of(box) == "orsbox-0"
    # the regular expression deploy/haproxy and deploy/nginx spell out
    assert re.fullmatch(r"[A-Za-z0-9-]+\.([a-z0-9-]+)", sid)[1] == "orsbox-0"  # type: ignore[index]
    assert CELL_OF_ID.match(box) and box.startswith("sbx-")
    # ids clients make up themselves (ors-sdk's own uuids) name no cell
    assert cell_of("0d6f4cc2-5b7e-4b7a-9e0e-3f8f0b8ae0b1") is None
    assert cell_of("abc.Not_A_Cell") is None


def test_the_default_cell_is_the_host_name_as_a_dns_label(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "Build_Host.example.org")
    assert default_cell() == "build-host"
    monkeypatch.setattr("socket.gethostname", lambda: "__")
    assert default_cell() == "cell"
    with pytest.raises(ValueError, match="DNS label"):
        check_cell("-bad")
    with pytest.raises(ValueError, match="DNS label"):
        Settings(cell="UPPER")


def test_a_session_of_another_cell_gets_421_naming_it(cell_a: TestClient) -> None:
    sid = new_sid(cell_a)
    assert cell_of(sid) == "cell-a"
    assert (
        cell_a.post(
            "/create", headers={"X-Session-ID": sid}, json={"split": "train", "index": 1}
        ).status_code
        == 200
    )
    foreign = mint("cell-b")
    for method, path, body in (
        ("POST", "/create", {"split": "train", "index": 1}),
        ("POST", "/ping", None),
        ("GET", "/protocol/prompt", None),
        ("POST", "/protocol/call", {"name": "echo", "input": {"text": "x"}}),
        ("POST", "/delete", None),
        ("POST", "/delete_session", None),
    ):
        r = cell_a.request(method, path, headers={"X-Session-ID": foreign}, json=body)
        assert r.status_code == 421, (path, r.text)
        assert "cell 'cell-b'" in r.json()["detail"] and "cell 'cell-a'" in r.json()["detail"]
    # its own session is untouched and answers as before
    assert cell_a.get("/protocol/prompt", headers={"X-Session-ID": sid}).json()[0]["text"] == (
        "train 1: what is 1+1?"
    )
    # an id naming no cell is this cell's business: 404, not 421
    assert cell_a.post("/ping", headers={"X-Session-ID": "no-cell-here"}).status_code == 404


def test_a_full_cell_answers_create_session_503_with_retry_after(cell_a: TestClient) -> None:
    first = new_sid(cell_a)
    new_sid(cell_a)  # two ids handed out: both places are held until their /create
    full = cell_a.post("/create_session")
    assert full.status_code == 503 and full.headers["retry-after"] == "5"
    assert "capacity" in full.json()["detail"]
    health = cell_a.get("/health").json()
    assert health["cell"] == "cell-a"
    assert (health["sessions"], health["reserved"], health["max_sessions"]) == (0, 2, 2)
    cell_a.post("/create", headers={"X-Session-ID": first}, json={"split": "train", "index": 0})
    assert cell_a.get("/health").json()["sessions"] == 1
    cell_a.post("/delete_session", headers={"X-Session-ID": first})
    assert cell_a.post("/create_session").status_code == 200  # the place is free again


def test_health_with_room_answers_503_only_while_the_cell_is_full(cell_a: TestClient) -> None:
    """What the router's image placement checks (orsbox.cluster.router, `by-image`)."""
    assert cell_a.get("/health", params={"room": 1}).status_code == 200
    first = new_sid(cell_a)
    second = new_sid(cell_a)
    full = cell_a.get("/health", params={"room": 1})
    assert full.status_code == 503 and full.json()["cell"] == "cell-a"
    assert full.json()["reserved"] == 2
    assert cell_a.get("/health").status_code == 200  # the plain check: up, as before
    for sid in (first, second):
        cell_a.post("/create", headers={"X-Session-ID": sid}, json={"split": "train", "index": 0})
    assert cell_a.get("/health", params={"room": 1}).status_code == 503
    cell_a.post("/delete_session", headers={"X-Session-ID": first})
    assert cell_a.get("/health", params={"room": 1}).status_code == 200


def test_an_unused_id_gives_its_place_back_after_the_reservation() -> None:
    clock = ManualClock()
    with app_client(clock, cell="cell-a", max_sessions=1, create_reservation_s=5) as client:
        new_sid(client)
        assert client.post("/create_session").status_code == 503
        client.portal.call(clock.advance, 5)  # type: ignore[union-attr]
        assert client.post("/create_session").status_code == 503  # held to its last second
        client.portal.call(clock.advance, 0.01)  # type: ignore[union-attr]
        assert client.post("/create_session").status_code == 200


def test_sandbox_ids_name_the_cell_and_another_cells_gets_421() -> None:
    token = "sandbox-token-0123456789"
    settings = {"cell": "cell-a", "sandbox_api": True, "token": token}
    with app_client(**settings) as client:
        manager = client.app.state.sandbox_api  # type: ignore[attr-defined]
        assert cell_of(manager.new_id()) == "cell-a"
        foreign = mint("cell-b", "sbx-")
        r = client.post("/ping", headers={"X-Session-ID": foreign, "X-API-Key": token})
        assert r.status_code == 421 and "cell 'cell-b'" in r.json()["detail"]
