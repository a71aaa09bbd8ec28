"""The status page shows what agents wrote: every value is escaped, so a hostile
agent's output cannot run in the operator's browser (the page's CSP would refuse an
inline script without the response's nonce as well)."""

from __future__ import annotations

from orsbox.server import status_page

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_agent_text_is_escaped_everywhere() -> None:
    episode = {
        "id": "e1",
        "session_id": HOSTILE,
        "environment": "coding",
        "task": {"question": HOSTILE},
        "prompt": [{"type": "text", "text": HOSTILE}],
        "started_at": 0.0,
        "ended_at": 1.0,
        "state": "ended",
        "final_reward": 1.0,
        "finished": True,
        "error": HOSTILE,
        "usage": {"cpu_s": 0.5},
        "calls": [
            {
                "seq": 1,
                "tool": HOSTILE,
                "input": {"command": HOSTILE},
                "output": {"ok": True, "output": {"blocks": [{"type": "text", "text": HOSTILE}]}},
                "outcome": "ok",
                "reward": None,
                "finished": False,
                "duration_s": 0.1,
                "error": HOSTILE,
            }
        ],
    }
    live = [
        {
            "sid": HOSTILE,
            "environment": HOSTILE,
            "task": HOSTILE,
            "state": "ready",
            "usage": {
                "wall_s": 1,
                "calls": 1,
                "cpu_s": None,
                "peak_memory_bytes": None,
                "output_bytes": 3,
            },
            "container": HOSTILE,
        }
    ]
    pages = [
        status_page.page("t", status_page.transcript(episode)),
        status_page.page(
            "t", status_page.status(status_page.live_sessions(live), [episode], [HOSTILE])
        ),
    ]
    for html in pages:
        assert "<script>alert" not in html and "<img" not in html
        assert "&lt;script&gt;alert" in html


def test_only_the_nonce_may_run_scripts() -> None:
    assert "script-src 'nonce-abc'" in status_page.csp("abc")
    assert "script-src 'none'" in status_page.csp(None)
    assert "default-src 'none'" in status_page.csp("abc")
