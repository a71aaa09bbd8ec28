"""The adversarial suite: hostile agents, hostile clients and faults, each against a
real server and a real Docker engine. `ITEMS` names the test(s) covering each item;
some were written before this suite, next to the code they first proved, and stay
there (test_index.py here checks that every name still exists).

Run it alone with `python -m pytest tests/adversarial` plus the tests named outside it,
or simply run the whole suite (CI does). Tests marked `disruptive` stop the Docker
engine; they run last, and only with ORSBOX_DISRUPTIVE_TESTS=1 (as scripts/test.sh sets)."""

ITEMS: dict[str, list[str]] = {
    "fork bomb": [
        "tests/containers/test_container_tools.py::test_fork_bomb_is_contained",
        "tests/sandbox/test_shell.py::test_fork_bomb_is_stopped",
    ],
    "memory bomb": [
        "tests/containers/test_container_tools.py::test_memory_bomb_is_reported_out_of_memory",
    ],
    "CPU spin beyond its timeout": [
        "tests/adversarial/test_processes.py::test_spinners_and_sleepers_end_at_their_timeout",
    ],
    "sleep 1e9": [
        "tests/adversarial/test_processes.py::test_spinners_and_sleepers_end_at_their_timeout",
    ],
    "a child ignoring SIGTERM": [
        "tests/containers/test_container_tools.py::test_timeout_kills_the_whole_tree_and_the_shell_survives",
        "tests/sandbox/test_shell.py::test_timeout_kills_everything_the_command_started",
    ],
    "orphaned background processes": [
        "tests/adversarial/test_processes.py::test_orphans_never_hold_a_call_and_die_with_their_shell",
        "tests/sandbox/test_shell.py::test_timeout_kills_everything_the_command_started",
        "tests/sandbox/test_shell.py::test_background_jobs_return_at_once",
    ],
    "1 GB of output": [
        "tests/adversarial/test_output.py::test_a_gigabyte_of_output_returns_capped",
    ],
    "a single 100 MB line": [
        "tests/containers/test_container_tools.py::test_output_floods_are_capped_and_server_memory_stays_bounded",
    ],
    "binary and invalid UTF-8 output": [
        "tests/containers/test_container_tools.py::test_binary_and_invalid_utf8_output",
    ],
    "ANSI escapes": [
        "tests/adversarial/test_output.py::test_terminal_escapes_come_back_verbatim_inside_valid_sse",
    ],
    "zombies: 1000 short-lived children leave no <defunct>": [
        "tests/adversarial/test_processes.py::test_a_thousand_short_lived_children_leave_no_zombie",
    ],
    "disk fill": [
        "tests/adversarial/test_disk.py::test_a_full_folder_is_enospc_and_nothing_else_notices",
        "tests/adversarial/test_disk.py::test_image_content_survives_in_bounded_folders",
    ],
    "kill -9 of the server with live sessions, then restart": [
        "tests/adversarial/test_server_faults.py::test_sigkill_mid_call_then_a_new_server_sweeps_and_serves",
        "tests/containers/test_container_lifecycle.py::test_sigkill_leaves_nothing_and_a_new_server_sweeps",
        "tests/sandbox/test_lifecycle.py::test_container_dies_with_its_server",
        "tests/sandbox/test_lifecycle.py::"
        "test_a_server_killed_after_start_before_the_guest_arrived_leaves_nothing",
        "tests/sandbox/test_lifecycle.py::"
        "test_a_server_killed_before_start_leaves_an_inert_container_the_sweep_removes",
    ],
    "docker kill of a session container": [
        "tests/containers/test_container_lifecycle.py::test_docker_kill_is_a_terminal_error",
    ],
    "the Docker engine restarted mid-episode": [
        "tests/adversarial/test_zz_engine_restart.py::test_the_engine_stops_and_comes_back_mid_episode",
    ],
    "64 sessions x 50 calls at once, exact outputs": [
        "tests/adversarial/test_load.py::test_64_sessions_make_their_calls_at_once",
    ],
    "malformed and oversized HTTP requests": [
        "tests/adversarial/test_http.py::test_malformed_requests_are_400_and_closed",
        "tests/adversarial/test_http.py::test_giant_request_heads_are_refused_in_bounded_memory",
        "tests/adversarial/test_http.py::test_slow_and_silent_clients_are_cut_off_and_block_no_one",
        "tests/test_http_protocol.py::test_malformed_json_is_400",
        "tests/test_http_protocol.py::test_oversize_bodies_are_413",
    ],
    "wrong tokens": [
        "tests/test_access.py::test_every_endpoint_but_health_needs_the_token",
    ],
    "API fuzzing (schemathesis)": [
        "tests/adversarial/test_schema_fuzz.py::test_every_operation_answers_as_the_schema_says",
        "tests/adversarial/test_schema_fuzz.py::test_session_operations_with_a_live_session",
    ],
    "soak (CI-sized; `python -m bench.soak` for the full run)": [
        "tests/adversarial/test_soak.py::test_a_short_soak_leaks_nothing",
    ],
    "secrets in no log line, error or response": [
        "tests/test_secrets.py::test_secrets_reach_the_environment_and_never_come_back",
        "tests/test_secrets.py::test_secrets_leaked_by_careless_code_are_redacted",
        "tests/test_secrets.py::test_secrets_never_appear_in_the_log",
    ],
    "gVisor from an empty engine: examples, then hostile calls with /health asked": [
        "tests/adversarial/test_gvisor_from_nothing.py::test_each_bundled_example_plays_to_its_reward",
        "tests/adversarial/test_gvisor_from_nothing.py::test_hostile_calls_with_health_answering",
    ],
}
