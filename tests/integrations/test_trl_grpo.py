"""A real `GRPOTrainer` (trl 1.16.0) training two steps on CPU against `orsbox serve`,
through TRL's own ORS adapter, with nothing downloaded:

* the tokenizer is a byte-level BPE trained here with `tokenizers`, carrying the Qwen3
  chat template TRL ships (from which TRL parses the model's tool calls);
* the model is a one-layer Qwen3 built from a config, its weights set so that whatever
  it reads it answers with one tool call, `submit` with the answer 7, then ends its
  turn: the residual stream carries the last token as a one-hot vector (attention and
  MLP write nothing), and the output layer maps every token to the tool call's and
  that one to `<|im_end|>`. A random model never calls a tool.

Task 0 of the bundled math environment's train split is answered 7, task 1 is not, so
the trainer must read rewards 1.0 and 0.0 from orsbox through its reward function.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import LiveServer, start_server

# torch, transformers and TRL are imported inside the test: collecting this module (as
# every run does, the test skipped unless `-m trl`) must not cost their import.
pytestmark = pytest.mark.trl

TOOL_CALL = '<tool_call>\n{"name": "submit", "arguments": {"answer": "7"}}\n</tool_call>'
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
HIDDEN = 512  # >= the vocabulary: one dimension per token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(["math"], tmp_path_factory.mktemp("grpo"))
    yield live
    live.stop()


def trained_tokenizer() -> Any:
    """Byte-level BPE whose merges make the tool call one token (the corpus repeats it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=HIDDEN - 16,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [TOOL_CALL] * 64 + ["How many muffins are left? Submit the final number.\n"] * 4
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=qwen3_chat_template,
    )
    return tokenizer


def tool_calling_model(tokenizer: Any) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab = len(tokenizer)
    assert vocab <= HIDDEN
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=HIDDEN // 4,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    [call] = tokenizer.encode(TOOL_CALL, add_special_tokens=False)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(vocab, HIDDEN))
        layer = model.model.layers[0]
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
        head = torch.zeros(vocab, HIDDEN)
        head[call, :vocab] = 1.0  # every token: the tool call next ...
        head[call, call] = 0.0
        head[end, call] = 1.0  # ... and after it, the end of the turn
        model.lm_head.weight.copy_(head * 2.0)  # the final norm scales one-hots by sqrt(HIDDEN)
    return model


def train_two_steps(
    url: str,
    env_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    indices: list[int],
    masked: bool,
) -> tuple[list[list[float | None]], list[dict[str, Any]]]:
    """Two GRPO steps on two tasks of `env_name` (two prompts, groups of two): the
    rewards each batch got, and the trainer's logged entries. `masked`: the reward and
    the factory of `orsbox.integrations.trl.mask_infra_failures`, not the spec's."""
    monkeypatch.setenv("OPENREWARD_SESSION_URL", url)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    pytest.importorskip("torch", reason="pip install torch==2.13.0, then -e '.[trl]'")
    from trl import GRPOConfig, GRPOTrainer
    from trl.experimental.openreward import OpenRewardSpec

    from orsbox.integrations.trl import mask_infra_failures

    tokenizer = trained_tokenizer()
    assert len(tokenizer.encode(TOOL_CALL, add_special_tokens=False)) == 1
    model = tool_calling_model(tokenizer)
    spec = OpenRewardSpec(url, env_name=env_name, indices=indices)
    factory, scored = spec.environment_factory, spec.reward_funcs
    if masked:
        factory, scored = mask_infra_failures(spec)
    rewards_seen: list[list[float | None]] = []

    def reward(environments, **kwargs) -> list[float | None]:
        found = scored(environments=environments, **kwargs)
        rewards_seen.append(found)
        return found

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=16,
        max_tool_calling_iterations=1,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=spec.train_dataset,
        environment_factory=factory,
        reward_funcs=reward,
    )
    try:
        trainer.train()
    finally:
        for env in trainer.environments or []:
            env._close()
        spec._sdk_client.environments.close()
    return rewards_seen, [entry for entry in trainer.state.log_history if "reward" in entry]


def test_grpo_trains_two_steps_on_orsbox_rewards(
    server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rewards_seen, logged = train_two_steps(
        server.url, "math", tmp_path, monkeypatch, indices=[0, 1], masked=False
    )
    assert len(rewards_seen) == 2  # one batch a step, each scored by orsbox
    for batch in rewards_seen:
        assert sorted(batch) == [0.0, 0.0, 1.0, 1.0], batch  # task 0 answered 7, task 1 not
    assert [entry["reward"] for entry in logged] == [0.5, 0.5]


def test_grpo_leaves_rollouts_whose_grader_could_not_run_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/infra-failures.md: task 1 of `graded` is a grading error (`[infra]`), task 3
    answered right (7). With `mask_infra_failures` the trainer gets None for the first,
    which it leaves out of its baseline and its logged mean: the mean is task 3's 1.0,
    where a grading error scored 0.0 would have made it 0.5."""
    (tmp_path / "server").mkdir()
    live = start_server(["tests/fixture_envs/grading_envs.py:Graded"], tmp_path / "server")
    try:
        rewards_seen, logged = train_two_steps(
            live.url, "graded", tmp_path, monkeypatch, indices=[3, 1], masked=True
        )
    finally:
        live.stop()
    assert len(rewards_seen) == 2
    for batch in rewards_seen:
        assert sorted(batch, key=str) == [1.0, 1.0, None, None], batch
    assert [entry["reward"] for entry in logged] == [1.0, 1.0]
